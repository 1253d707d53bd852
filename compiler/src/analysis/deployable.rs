//! Whether one layout can be deployed: the one verdict that `dic check` (through
//! [`super::analyze`]), the planner's candidates and alternatives, its advice and E0701's
//! figures all read, so the planner never proposes what the checker refuses.
//!
//! Input: a [`Scenario`] (its layout on its cluster, or one node group of it). Output:
//! [`deployability_findings`] — every structural rule, every memory rule, then, when
//! those pass, the launch rule (E0801: the weights vLLM can load from the checkpoint and
//! how it starts the processes, formerly raised only while lowering) and the placement rule (E0408: the layout's replicas placed
//! alone on the cluster by the cluster accounting's own allocator) — and [`deployable`],
//! the errors among them. The launch and placement rules run only on a layout that
//! passes the others, so each layout has one first reason and lowering never meets a
//! layout it cannot launch. What depends on the other deployments sharing a cluster
//! (their GPUs, an autoscaler's reserve) and on the file (E0409's pin) is the driver's
//! accounting; a layout refused here is refused there too. [`pools_cannot_pair`] is the
//! rule a disaggregated pair of pools must pass (E0410), for written splits and the
//! planner's alike.

use super::allocation::{allocate, Demand, GroupCapacity};
use super::kv_offload::{host_memory, HostMemory};
use super::memory::{memory, MemoryReport};
use super::rules::{self, Anchor, Finding};
use super::Scenario;
use crate::diagnostics::{Code, Severity};
use crate::program::Layout;
use crate::units::fmt_bytes;

/// How vLLM starts one deployment's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchKind {
    /// Each replica fits in a node: one `vllm serve` per replica.
    Replicas,
    /// Each replica spans whole nodes (vLLM's multi-node launch, native or Ray).
    MultiNode,
    /// A MoE model's DP ranks as one vLLM engine (`--data-parallel-size`).
    DataParallel,
}

/// How a deployment's processes are grouped: independent launch groups, nodes per group,
/// GPUs per pod and DP ranks per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    pub kind: LaunchKind,
    pub groups: u64,
    pub nodes_per_group: u64,
    pub gpus_per_pod: u64,
    pub dp_local: u64,
    pub per_node: u64,
    /// Nodes one DP rank spans (vLLM's `ParallelConfig.nnodes_within_dp`): 1 unless a MoE
    /// engine's rank is wider than a node.
    pub nodes_per_dp_rank: u64,
}

/// Why vLLM cannot launch a layout (E0801): what is wrong, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRefusal {
    pub message: String,
    pub help: String,
}

/// How vLLM launches layout `l` of the scenario's model on its nodes, or why it cannot.
pub fn launch_shape(s: &Scenario, l: Layout) -> Result<LaunchShape, LaunchRefusal> {
    let rg = l.replica_gpus();
    let per_node = s.topology.gpus_per_node.max(1);
    let shape = |kind, groups, nodes_per_group, gpus_per_pod, dp_local| LaunchShape {
        kind,
        groups,
        nodes_per_group,
        gpus_per_pod,
        dp_local,
        per_node,
        nodes_per_dp_rank: 1,
    };
    let refuse = |message: String, help: &str| LaunchRefusal {
        message,
        help: help.to_string(),
    };
    // A MoE model's DP ranks are one vLLM engine (`--data-parallel-size`): its experts
    // are sharded over all TP × DP ranks (whole experts with EP, each expert's width
    // without), as the memory, communication and step models take them.
    if s.model.is_moe() && l.dp > 1 {
        // A rank wider than a node spans whole nodes (vLLM 0.33: `--nnodes` over all of
        // them, `ParallelConfig.nnodes_within_dp` = nodes per rank, inferred one rank per
        // node group; the nodes past each rank's first run headless workers), as a DeepSeek-R1
        // `tp 8 × dp 9 × ep` over a GB200 NVL72 rack's 4-GPU trays does. vLLM refuses only
        // a node count its DP node groups do not divide, which whole-node ranks never are.
        if rg > per_node {
            if !rg.is_multiple_of(per_node) {
                return Err(refuse(
                    format!("a MoE model's data-parallel rank of {rg} GPUs spans nodes, so it must fill whole {per_node}-GPU nodes"),
                    "use tp × pp that is a whole number of nodes, or at most one node",
                ));
            }
            let span = rg / per_node;
            return Ok(LaunchShape {
                nodes_per_dp_rank: span,
                ..shape(LaunchKind::DataParallel, 1, l.dp * span, per_node, 1)
            });
        }
        if !per_node.is_multiple_of(rg) {
            return Err(refuse(
                format!("a MoE model's data-parallel ranks run as one vLLM engine: each rank's tp × pp ({rg} GPUs) must divide the {per_node}-GPU node it shares"),
                "vLLM's data parallelism places whole DP ranks on nodes: use a tp × pp that divides the GPUs per node, or fills whole nodes",
            ));
        }
        let dp_local = (per_node / rg).min(l.dp);
        if !l.dp.is_multiple_of(dp_local) {
            return Err(refuse(
                format!(
                    "dp {} is not a multiple of the {dp_local} DP ranks per node",
                    l.dp
                ),
                "use a dp that fills whole nodes",
            ));
        }
        return Ok(shape(
            LaunchKind::DataParallel,
            1,
            l.dp / dp_local,
            dp_local * rg,
            dp_local,
        ));
    }
    if rg <= per_node {
        return Ok(shape(LaunchKind::Replicas, l.dp, 1, rg, 1));
    }
    if !rg.is_multiple_of(per_node) {
        return Err(refuse(
            format!("a replica of {rg} GPUs is not a whole number of {per_node}-GPU nodes"),
            "use tp × pp that fills whole nodes",
        ));
    }
    Ok(shape(
        LaunchKind::MultiNode,
        l.dp,
        rg / per_node,
        per_node,
        1,
    ))
}

/// The quantization vLLM applies while loading (`--quantization fp8` for FP8 weights from
/// a 16-bit checkpoint), or why it cannot produce the scenario's weight format from the
/// checkpoint's.
pub fn load_quantization(s: &Scenario) -> Result<Option<String>, LaunchRefusal> {
    let m = &s.model;
    if m.weights == m.dtype || m.prequantized {
        return Ok(None);
    }
    match m.weights.as_str() {
        "fp8" => Ok(Some("fp8".to_string())),
        other => Err(LaunchRefusal {
            message: format!(
                "vLLM cannot quantize a {} checkpoint to `{other}` while loading",
                m.dtype
            ),
            help:
                "serve a checkpoint already in that format and mark the model `prequantized = true`"
                    .into(),
        }),
    }
}

/// The KV cache dtype as vLLM spells it (`None` for the model's own), or why vLLM refuses
/// the scenario's: it spells the 16-bit cache dtypes out
/// (`CacheConfig._validate_cache_dtype`) and refuses one that differs from the model's
/// dtype (`VllmConfig._reject_mismatched_float_kv_cache`): docs/vllm-rules.md rows 38, 39.
pub fn kv_cache_dtype(s: &Scenario) -> Result<Option<String>, LaunchRefusal> {
    let m = &s.model;
    match m.kv_cache.as_str() {
        "auto" => Ok(None),
        "bf16" | "fp16" if m.kv_cache != m.dtype => Err(LaunchRefusal {
            message: format!(
                "vLLM refuses a {} KV cache on a {} model (its 16-bit cache dtype must be the model's)",
                m.kv_cache, m.dtype
            ),
            help: "write `kv_cache = auto` (the model's own dtype) or an FP8 format".into(),
        }),
        "bf16" => Ok(Some("bfloat16".to_string())),
        "fp16" => Ok(Some("float16".to_string())),
        other => Ok(Some(other.to_string())),
    }
}

/// E0801 as a finding: the launch rule (the weights and KV cache vLLM can load, then the
/// process layout).
fn launch_rule(s: &Scenario) -> Option<Finding> {
    let refusal = load_quantization(s)
        .err()
        .or_else(|| kv_cache_dtype(s).err())
        .or_else(|| launch_shape(s, s.layout).err())?;
    Some(Finding::new(
        Code::UnsupportedLaunch,
        Anchor::Layout,
        refusal.message,
        "here",
        Some(refusal.help),
    ))
}

/// What layout `l` asks of a cluster, as the cluster's accounting takes it: one unit of
/// whole nodes for a MoE model's DP engine with EP, else one slot per replica.
pub fn demand_for(s: &Scenario, l: Layout) -> Demand {
    let whole = l.ep && s.model.is_moe() && l.dp > 1;
    Demand {
        name: String::new(),
        replica_gpus: if whole { l.gpus() } else { l.replica_gpus() },
        replicas: l.dp.max(1),
        reserved: 0,
        whole,
        group: None,
        port: 0,
    }
}

/// Replicas of layout `l` that do not fit the scenario's nodes when placed alone by the
/// cluster accounting's allocator (0 when it fits).
///
/// Counted, not placed: on one empty group the allocator's first fit of identical units
/// fills node after node, so `units_that_fit` gives its count in O(1). The planner asks
/// this of every replica count of every family, and placing each count (O(replicas ×
/// nodes)) made the search quadratic on large clusters (a fuzzed 16k-node cluster never
/// finished). `alone_matches_the_allocator` checks the count against `allocate`.
pub fn unplaced_alone(s: &Scenario, l: Layout) -> u64 {
    let t = &s.topology;
    unplaced_on_empty(t.nodes, t.gpus_per_node, &demand_for(s, l))
}

/// What `allocate` leaves unplaced of demand `d` (no reserve) alone on one empty group.
fn unplaced_on_empty(nodes: u64, gpus_per_node: u64, d: &Demand) -> u64 {
    let units = if d.whole { 1 } else { d.replicas };
    let placed = units.min(units_that_fit(nodes, gpus_per_node, d.replica_gpus));
    match units - placed {
        0 => 0,
        _ if d.whole => d.replicas,
        n => n,
    }
}

/// Units of `gpus` GPUs the allocator's first fit places on `nodes` empty nodes of
/// `gpus_per_node`: several to a node when they fit one, else whole adjacent free nodes.
fn units_that_fit(nodes: u64, gpus_per_node: u64, gpus: u64) -> u64 {
    let (per_node, gpus) = (gpus_per_node.max(1), gpus.max(1));
    if gpus <= per_node {
        nodes.saturating_mul(per_node / gpus)
    } else {
        nodes / gpus.div_ceil(per_node)
    }
}

/// Whether a disaggregated pair (`prefill` then `decode`, `dp` their replicas) launches
/// (each pool as lowering launches it, E0801) and fits the scenario's nodes alone, as the
/// cluster's accounting places the two pools (E0408).
pub fn pair_launchable_and_placeable(s: &Scenario, prefill: Layout, decode: Layout) -> bool {
    launch_shape(s, prefill).is_ok()
        && launch_shape(s, decode).is_ok()
        && pair_unplaced_alone(s, prefill, decode) == 0
}

/// Replicas of a disaggregated pair that do not fit the scenario's nodes when placed
/// alone (0 when both pools fit).
fn pair_unplaced_alone(s: &Scenario, prefill: Layout, decode: Layout) -> u64 {
    let t = &s.topology;
    let group = GroupCapacity {
        node: t.gpu.name.clone(),
        nodes: t.nodes,
        gpus_per_node: t.gpus_per_node,
    };
    let pool = |l: Layout| Demand {
        whole: false,
        replica_gpus: l.replica_gpus(),
        ..demand_for(s, l)
    };
    allocate(&[group], &[pool(prefill), pool(decode)])
        .iter()
        .map(|p| p.unplaced)
        .sum()
}

/// E0408 for a layout that does not fit its cluster even alone: its replicas take more
/// nodes, as placed, than the cluster has (`tp 2 × pp 3 × dp 8` on six 8-GPU nodes is one
/// 6-GPU replica per node: 8 nodes).
fn placement_rule(s: &Scenario) -> Option<Finding> {
    let l = s.layout;
    let unplaced = unplaced_alone(s, l);
    if unplaced == 0 {
        return None;
    }
    let t = &s.topology;
    let per_node = t.gpus_per_node.max(1);
    let rg = l.replica_gpus();
    let per = if rg <= per_node {
        let fit = per_node / rg.max(1);
        format!(
            "{fit} replica{} of {rg} GPUs per {per_node}-GPU node",
            if fit == 1 { "" } else { "s" }
        )
    } else {
        format!("{} whole nodes per replica", rg.div_ceil(per_node))
    };
    Some(Finding::new(
        Code::ClusterOversubscribed,
        Anchor::Layout,
        format!(
            "the cluster has no room for it: its {} replica{} of {rg} GPUs take {} nodes as placed ({per}), the cluster has {}; {unplaced} replica{} not fit",
            l.dp,
            if l.dp == 1 { "" } else { "s" },
            t.nodes_for_layout(&l),
            t.nodes,
            if unplaced == 1 { " does" } else { "s do" }
        ),
        "a replica runs inside one node or on whole nodes of its own",
        Some(format!(
            "use a tp × pp that divides the {per_node} GPUs of a node, or fewer replicas"
        )),
    ))
}

/// Every finding that decides whether the scenario's layout can be deployed (warnings and
/// advice among them): structural, memory, then launch and placement on a layout that
/// passes the others. `mem` is the scenario's memory model; `remedies`: whether the memory
/// errors' and E0401's help name a layout that would fit ([`rules::memory_rules`],
/// [`rules::structural`]: `dic check` does, the planner's quick pass does not — the same
/// verdicts either way).
pub fn deployability_findings(s: &Scenario, mem: &MemoryReport, remedies: bool) -> Vec<Finding> {
    let mut findings = rules::structural(s, remedies);
    findings.extend(rules::memory_rules(s, mem, remedies));
    findings.extend(kv_offload_findings(s));
    findings.extend(super::lora_rules::lora_findings(s));
    if !findings.iter().any(|f| f.severity == Severity::Error) {
        findings.extend(launch_rule(s));
        findings.extend(placement_rule(s));
    }
    findings
}

/// Whether the scenario's layout can be deployed on its cluster, and if not, every error
/// that says why (what `dic check` reports for it written).
pub fn deployable(s: &Scenario) -> Result<(), Vec<Finding>> {
    let errors: Vec<Finding> = deployability_findings(s, &memory(s), true)
        .into_iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The checks on layout `l` that need no model of memory or speed (launch and
/// placement): what the planner uses to skip replica counts before analysing them.
pub fn launchable_and_placeable(s: &Scenario, l: Layout) -> bool {
    launch_shape(s, l).is_ok() && unplaced_alone(s, l) == 0
}

/// E0410 where the pools' GPUs make vLLM pick different attention backends: NIXL hashes
/// the backend's name (with the cache dtype) into its handshake
/// (`nixl/metadata.py:compute_nixl_compatibility_hash`) and the first transfer fails with
/// "NIXL compatibility hash mismatch" (`NixlBaseConnectorWorker`, `enforce_handshake_compat`
/// on by default): Blackwell's FlashInfer against Hopper's FlashAttention, say.
fn backends_differ(ps: &Scenario, ds: &Scenario) -> Option<Finding> {
    use super::attention_backend::default_backend;
    let pick = |s: &Scenario| {
        let g = &s.topology.gpu;
        default_backend(&s.model, g.compute_capability(), g.rocm, s.layout.tp)
    };
    let (p, d) = (pick(ps)?, pick(ds)?);
    (p != d).then(|| {
        Finding::new(
            Code::PoolsCannotPair,
            Anchor::Layout,
            format!(
                "NIXL compatibility hash mismatch: the prefill pool's {} pick the {p} attention backend and the decode pool's {} {d}, and vLLM's NIXL connector hashes the backend into its handshake, so no KV block crosses (\"Prefill and decode instances have incompatible configurations … attention backends\")",
                ps.topology.gpu.name, ds.topology.gpu.name
            ),
            "pools on GPUs that pick different attention backends",
            Some("put both pools on GPUs of one generation (the same attention backend), or serve aggregated".into()),
        )
    })
}

/// E0410: what vLLM's NIXL connector cannot transfer between the pools: TPs that do not
/// divide one another (`TransferTopology.tp_ratio` asserts it at the handshake), a model
/// with recurrent (Mamba, linear-attention) layers between engines of different TP (vLLM's
/// compatibility matrix: heterogeneous TP for hybrid SSM models is work in progress), and
/// pipeline stages in a pool of a model with a hybrid KV layout (`NixlBaseConnectorWorker.__init__`:
/// the pull connector dic writes refuses PP with hybrid layouts). The planner's split
/// candidates go through the same rule.
pub fn pools_cannot_pair(ps: &Scenario, ds: &Scenario) -> Option<Finding> {
    let m = &ds.model;
    let (tp_p, tp_d) = (ps.layout.tp.max(1), ds.layout.tp.max(1));
    let finding = |message: String, label: &str, help: String| {
        Some(Finding::new(
            Code::PoolsCannotPair,
            Anchor::Layout,
            message,
            label,
            Some(help),
        ))
    };
    if !tp_p.is_multiple_of(tp_d) && !tp_d.is_multiple_of(tp_p) {
        return finding(
            format!(
                "the prefill pool runs tp {tp_p} and the decode pool tp {tp_d}: vLLM's NIXL connector maps the KV heads of one pool's ranks onto the other's only when one TP divides the other (\"Local tensor parallel size … is not divisible by remote tensor parallel size …\")"
            ),
            "TPs that do not divide one another",
            format!("make one pool's tp a multiple of the other's (e.g. `tp {}` on both)", tp_p.max(tp_d)),
        );
    }
    if let Some(f) = backends_differ(ps, ds) {
        return Some(f);
    }
    // `VllmConfig._post_init_kv_transfer_config`: `--kv-offloading-size` sets the
    // connector to its own (OffloadingConnector, LMCacheMPConnector) over the
    // NixlConnector dic writes, with no error.
    if ps.engine.kv_offload > 0.0 || ds.engine.kv_offload > 0.0 {
        return finding(
            "kv_offload replaces the P/D connector: with `--kv-offloading-size` vLLM 0.33 sets `kv_connector` to its offloading connector over the NixlConnector the pools need (config/vllm.py:_post_init_kv_transfer_config), so both pools would start as aggregated engines and no KV cache would move between them".into(),
            "kv_offload on disaggregated pools",
            "drop `kv_offload` from a disaggregated deployment, or serve it aggregated with `kv_offload`".into(),
        );
    }
    if ps.engine.expandable_segments_without_cumem()
        || ds.engine.expandable_segments_without_cumem()
    {
        return finding(
            "KV connector NixlConnector is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless enable_cumem_allocator is also enabled: the allocator can remap the KV cache's pages under the memory NIXL registered (config/vllm.py:_verify_kv_transfer_compat)".into(),
            "expandable segments under a KV connector",
            "drop `expandable_segments:True` from `env`'s PYTORCH_CUDA_ALLOC_CONF, or add `--enable-cumem-allocator` to `extra_args`".into(),
        );
    }
    let kinds: Vec<_> = (0..m.layers)
        .map(|l| m.layer(l).mixer)
        .filter(|k| *k != crate::layers::Mixer::None)
        .collect();
    let recurrent = kinds.iter().any(|k| k.is_recurrent());
    // `ssm_conv_transfer_utils.derive_mamba_conv_split`: NIXL moves the states of Mamba-1,
    // Mamba-2 and Gated DeltaNet layers only. dic's linear-attention layers without a
    // causal conv (`linear_conv_kernel = 1`: MiniMax's lightning attention, vLLM's
    // `mamba_type` `linear`) are none of them.
    let conv_free_linear = kinds.contains(&crate::layers::Mixer::Linear)
        && m.detail.linear.is_some_and(|la| la.conv_kernel <= 1);
    if conv_free_linear {
        return finding(
            "the model's linear-attention layers have no causal conv (lightning attention, vLLM's `mamba_type` `linear`): vLLM's NIXL connector transfers the recurrent states of Mamba-1, Mamba-2 and Gated DeltaNet layers only (\"Conv transfer only supports Mamba1, Mamba2 and GDN models, got mamba_type=linear\")".into(),
            "a recurrent layer NIXL cannot transfer",
            "serve this model aggregated (one pool, no prefill/decode split)".into(),
        );
    }
    if recurrent && tp_p != tp_d {
        return finding(
            format!(
                "the prefill pool runs tp {tp_p} and the decode pool tp {tp_d}, and the model keeps recurrent states (Mamba or linear attention): vLLM's NIXL connector does not transfer those between engines of different TP"
            ),
            "heterogeneous TP for a hybrid model",
            format!(
                "give both pools the same tp (e.g. `tp {}` on each), or serve the model aggregated",
                tp_p.max(tp_d)
            ),
        );
    }
    let hybrid = kinds.iter().any(|k| Some(k) != kinds.first());
    let pp = ps.layout.pp.max(ds.layout.pp);
    if hybrid && pp > 1 {
        return finding(
            format!(
                "NixlConnector (pull) does not support pipeline_parallel_size > 1 with hybrid KV cache layouts (HMA): a pool runs pp {pp} and {} mixes layer kinds",
                ds.model_name
            ),
            "pipeline stages in a pool of a hybrid model",
            "drop `pp` from both pools (a wider tp, or more replicas)".into(),
        );
    }
    None
}

/// The findings on `kv_offload`: E0511 on a hybrid model without prefix caching, W0506
/// for LMCache (whose server dic does not deploy), E0314
/// under expandable segments without the cumem allocator (rows 106, 109 of
/// docs/vllm-rules.md); E0508 when the buffer and vLLM's own host memory do not
/// fit the node's `cpu_memory`, W0505 when the node states none; W0504 when the workload
/// declares no prefix reuse, so no later prompt can hit what the buffer keeps.
pub fn kv_offload_findings(s: &Scenario) -> Vec<Finding> {
    let mut out = Vec::new();
    if s.engine.kv_offload <= 0.0 {
        return out;
    }
    // `offloading/config.py:build_offloading_config`: with prefix caching off a hybrid
    // model's Mamba group keeps `mamba_cache_mode = none` and a block of max_model_len
    // tokens, the block hash falls back to the groups' LCM, and the attention groups'
    // blocks do not divide by it.
    let m = &s.model;
    if s.engine.enable_prefix_caching == Some(false) && m.has_recurrent_layers() {
        out.push(Finding::new(
            Code::OffloadWithoutPrefixCaching,
            Anchor::Field("kv_offload"),
            "KV offloading needs prefix caching on a model with Mamba or linear-attention layers: without it vLLM keeps one recurrent state per request in a block of max_model_len tokens, the offloaded blocks' hash size becomes the groups' least common multiple, and the attention blocks do not divide by it (\"tokens_per_block=… not divisible by tokens_per_hash=…. Hybrid models (e.g. Mamba+Attention) need --enable-prefix-caching to align block sizes.\", distributed/kv_transfer/kv_connector/v1/offloading/config.py:build_offloading_config)".into(),
            "KV offload on a hybrid model without prefix caching",
            Some("remove `enable_prefix_caching = false` (offloaded blocks are only ever read back as prefix hits), or drop `kv_offload`".into()),
        ));
    }
    if s.engine.kv_offload_lmcache {
        out.push(Finding::new(
            Code::LmcacheServerMissing,
            Anchor::Field("kv_offload"),
            "vLLM 0.33 runs `--kv-offloading-backend lmcache` as LMCache's multi-process connector (LMCacheMPConnector), which keeps the offloaded blocks in a separate LMCache server it reaches at tcp://localhost:5555 and does not take `kv_offloading_size` (config/vllm.py:_post_init_kv_transfer_config); dic starts no such server, so the engine has no offload store, and dic's CPU-memory figures for the buffer describe memory vLLM never allocates".into(),
            "LMCache without its server",
            Some("use `backend = native` (vLLM's own CPU offloading, sized by `size`), or run an LMCache server beside each engine yourself".into()),
        ));
    }
    if s.engine.expandable_segments_without_cumem() {
        out.push(Finding::new(
            Code::InvalidExtraArg,
            Anchor::Engine("env"),
            "KV connector OffloadingConnector is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless enable_cumem_allocator is also enabled: `kv_offload` runs through a KV connector, and vLLM 0.33 refuses every connector under that allocator (config/vllm.py:_verify_kv_transfer_compat)".into(),
            "expandable segments beside kv_offload",
            Some("drop `expandable_segments:True` from PYTORCH_CUDA_ALLOC_CONF, or add `--enable-cumem-allocator` to `extra_args`".into()),
        ));
    }
    let host = launch_shape(s, s.layout)
        .ok()
        .and_then(|shape| host_memory(s, shape.gpus_per_pod));
    if let Some(h) = host.filter(|h| !h.fits()) {
        let cap = h.cap_per_pod.unwrap_or(0);
        out.push(Finding::new(
            Code::HostMemoryShort,
            Anchor::Field("kv_offload"),
            format!(
                "the KV offload buffer does not fit the node's CPU memory: each {}-GPU pod needs {} ({} of offloaded KV + {} for vLLM, its workers and /dev/shm), {} such pods on a node need {}, but 90% of the node's cpu_memory is {} ({} a pod)",
                h.gpus_per_pod,
                fmt_bytes(h.per_pod as f64),
                fmt_bytes(h.buffer_per_pod as f64),
                fmt_bytes((h.per_pod - h.buffer_per_pod) as f64),
                h.pods_per_node,
                fmt_bytes((h.per_pod * h.pods_per_node) as f64),
                fmt_bytes(s.topology.cpu_memory.unwrap_or(0.0) * 0.9),
                fmt_bytes(cap as f64),
            ),
            "host memory short",
            Some(format!(
                "lower `kv_offload.size` to at most {} per engine, or use nodes with more CPU memory",
                fmt_bytes(largest_buffer(s, &h) as f64)
            )),
        ));
    }
    if let Some(f) = host.and_then(|h| pod_memory_below_buffer(s, &h)) {
        out.push(f);
    }
    if s.topology.cpu_memory.is_none() {
        out.push(Finding::new(
            Code::HostMemoryUnchecked,
            Anchor::Field("kv_offload"),
            format!(
                "the node states no cpu_memory: dic cannot check that {} of KV offload buffer per engine fits beside vLLM's own host memory",
                fmt_bytes(s.engine.kv_offload)
            ),
            "host memory not checked",
            Some("state the node's host memory (`cpu_memory = 2 TiB` on the node) so dic checks the buffer and caps the pods' memory requests by it".into()),
        ));
    }
    if s.workload.is_some_and(|w| w.declared_reuse <= 0.0) {
        out.push(Finding::new(
            Code::OffloadWithoutReuse,
            Anchor::Field("kv_offload"),
            format!(
                "kv_offload keeps {} of evicted KV blocks in CPU memory per engine, but the workload declares no prefix reuse: no later prompt loads them back",
                fmt_bytes(s.engine.kv_offload)
            ),
            "offload buffer no prompt hits",
            Some("remove `kv_offload`, or state the reuse on the workload (`prefix_reuse`, `shared_prefix`) if prompts share prefixes (multi-turn chat, repeated documents)".into()),
        ));
    }
    out
}

/// E0509: a `pod = { memory }` written below what the pod needs with its share of the KV
/// offload buffer ([`HostMemory::per_pod`]). The memory is the pod's limit too, and each
/// GPU's worker pins its share of the buffer when the engine starts (`config/cache.py`:
/// `kv_offloading_size` over the ranks), so the pod would be killed for memory (OOM)
/// when the buffer fills, if not at start-up.
fn pod_memory_below_buffer(s: &Scenario, h: &HostMemory) -> Option<Finding> {
    let written = s.engine.pod_memory?;
    if written >= h.per_pod as f64 {
        return None;
    }
    Some(Finding::new(
        Code::PodMemoryBelowOffload,
        Anchor::Field("pod"),
        format!(
            "`pod = {{ memory = {} }}` is below what each {}-GPU pod needs with KV offloading: {} ({} of offload buffer its workers pin + {} for vLLM, its workers and /dev/shm); the pod's memory is also its limit, so it would be killed for memory (OOM) when vLLM pins the buffer",
            fmt_bytes(written),
            h.gpus_per_pod,
            fmt_bytes(h.per_pod as f64),
            fmt_bytes(h.buffer_per_pod as f64),
            fmt_bytes((h.per_pod - h.buffer_per_pod) as f64),
        ),
        "pod memory below its offload buffer",
        Some(format!(
            "raise `pod.memory` to at least {}, leave it out (dic then requests what the pod needs), or lower `kv_offload.size`",
            fmt_bytes(h.per_pod as f64)
        )),
    ))
}

/// The largest buffer per engine that fits the pod's cap: the cap less what the pod
/// needs without a buffer, over the pod's GPUs, times the engine's ranks.
fn largest_buffer(s: &Scenario, h: &HostMemory) -> u64 {
    let cap = h.cap_per_pod.unwrap_or(0);
    let without = h.per_pod - h.buffer_per_pod;
    let per_gpu = cap.saturating_sub(without) / h.gpus_per_pod.max(1);
    per_gpu * (s.layout.tp * s.layout.pp).max(1)
}

#[cfg(test)]
mod alone_tests {
    use super::*;

    /// The counted placement agrees with the allocator on every small shape.
    #[test]
    fn alone_matches_the_allocator() {
        for nodes in 0..6u64 {
            for gpn in [1u64, 2, 4, 8] {
                for gpus in 1..=20u64 {
                    for replicas in 1..=12u64 {
                        for whole in [false, true] {
                            let group = GroupCapacity {
                                node: "n".into(),
                                nodes,
                                gpus_per_node: gpn,
                            };
                            let d = Demand {
                                name: String::new(),
                                replica_gpus: gpus,
                                replicas,
                                reserved: 0,
                                whole,
                                group: None,
                                port: 0,
                            };
                            let got = unplaced_on_empty(nodes, gpn, &d);
                            let placed = allocate(&[group], &[d]);
                            let want = placed.first().map_or(0, |p| p.unplaced);
                            assert_eq!(
                                got, want,
                                "{nodes} × {gpn}, {gpus} GPUs × {replicas} (whole {whole})"
                            );
                        }
                    }
                }
            }
        }
    }
}
