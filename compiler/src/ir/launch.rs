//! Lowering one decided deployment: the launch mode (replicas, native multi-node, Ray,
//! wide-EP data parallel), engine flags, the network profile and Kubernetes settings into
//! its launch plan, and the analysis's numbers into its forecast; the communication plan
//! and the report's data come from their modules.

use super::*;

pub(super) fn err(
    code: Code,
    at: crate::span::FileSpan,
    message: String,
    help: &str,
) -> Diagnostic {
    Diagnostic::new(code, message)
        .primary(at.file, at.span, "here")
        .help(help.to_string())
}

/// One deployment lowered: its launch plan, its forecast, and the warnings lowering raised
/// (W0801).
pub(super) type Lowered = (DeploymentPlan, DeploymentForecast, Vec<Diagnostic>);

/// One deployment's launch plan and forecast, or why it cannot be launched (E0801).
pub(super) fn lower_one(planned: &Planned<'_>, p: &Program) -> Result<Lowered, Box<Diagnostic>> {
    let ds = planned.scenario;
    let def = p.def(ds.deploy).expect("scenario of a definition");
    let Body::Deploy(d) = &def.body else {
        unreachable!("scenarios come from deployments")
    };
    let s = &ds.scenario;
    let l = s.layout;
    let t = &s.topology;
    let fail = |message: String, help: &str| {
        Box::new(err(
            Code::UnsupportedLaunch,
            d.layout_at,
            format!("deploy `{}`: {message}", def.name),
            help,
        ))
    };
    let model = model_plan(p, def, d, s, &fail)?;
    let shape = launch_shape(s, &fail)?;
    let mut warnings = Vec::new();
    // A split's N−1 is the pair's (`planner::pool_failure`, once per deployment by the
    // driver): each pool's budget from it, and the report's figures.
    let pools_n1 = planned.pool_failure.filter(|_| ds.pool.is_some());
    let gpu = gpu_plan(p, def, d, ds.group, t, &mut warnings);
    let mut plan = DeploymentPlan {
        name: match (&ds.share, &ds.pool) {
            // Each node group's part is its own launch unit (scripts, pods, NCCL plan).
            (Some(share), _) => format!("{}-{}", def.name, share.node),
            // So is each pool of a disaggregated deployment.
            (None, Some(part)) => format!("{}-{}", def.name, part.pool.name()),
            (None, None) => def.name.clone(),
        },
        disaggregated: ds
            .pool
            .as_ref()
            .map(|part| disagg_plan(&def.name, s, part, s.engine.port)),
        part_of: ds.share.as_ref().map(|sh| PartOf {
            deployment: def.name.clone(),
            replicas: sh.replicas,
            of: sh.of,
            first: ds.group == first_share_group(p, ds),
        }),
        cluster_nodes: Vec::new(),
        replica_ports: Vec::new(),
        model,
        gpu,
        layout: l,
        gpus_per_node: shape.per_node,
        fabric_transport: fabric_transport(t, shape.nodes_per_group),
        nvlink_domain_gpus: if t.scale_up.is_some() {
            t.scale_up_domain.max(shape.per_node)
        } else {
            1
        },
        nodes: t.nodes_for_layout(&l),
        launch: shape.launch,
        groups: shape.groups,
        nodes_per_group: shape.nodes_per_group,
        gpus_per_pod: shape.gpus_per_pod,
        dp_local: shape.dp_local,
        nodes_per_dp_rank: shape.nodes_per_dp_rank,
        engine: engine_plan(d, &s.engine),
        network: t_network(p, d.cluster, ds.group),
        kubernetes: KubernetesPlan {
            disruption: match (&ds.pool, pools_n1) {
                (Some(part), Some(f)) => Some(pool_disruption(part, s, f, cluster_shared(p, d))),
                (Some(_), None) => None,
                (None, _) => disruption_of(planned, s, cluster_shared(p, d)),
            },
            ..kubernetes_plan(p, d, ds.group, planned.analysis, s, &shape)
        },
        comm: super::comm::comm_plan(ds, planned.analysis),
    };
    if plan.disaggregated.is_some() {
        conv_state_layout_for_nixl(&s.model, &mut plan.engine.env);
    }
    route_pools(&mut plan);
    if !planned.slots.is_empty() {
        place_on_cluster(&mut plan, planned.slots, &ds.group_node);
    }
    let forecast = super::forecast::deployment_forecast(
        &plan.name,
        ds,
        planned.analysis,
        planned.figures,
        planned.search,
        planned.whatif,
        pools_n1,
    );
    Ok((plan, forecast, warnings))
}

/// A disaggregated pool behind the endpoint picker (`routing`): its P/D routing, and on
/// the decode pool vLLM moved off the deployment's port, which llm-d's routing sidecar
/// takes (`ir::gateway::pd_routing`). Every consumer of the engine's port (commands,
/// container ports, probes, Services, monitors) then agrees on where vLLM listens.
fn route_pools(plan: &mut DeploymentPlan) {
    let (Some(x), Some(g)) = (&plan.disaggregated, plan.kubernetes.gateway.as_mut()) else {
        return;
    };
    let pd = super::gateway::pd_routing(
        x.role,
        plan.engine.port,
        (NIXL_SIDE_CHANNEL_PORT, plan.gpus_per_node),
    );
    if let Some(sidecar) = &pd.sidecar {
        plan.engine.port = sidecar.vllm_port;
    }
    g.pd = Some(pd);
}

/// Why a deployment cannot be launched, at its layout (E0801).
type Refusal<'a> = dyn Fn(String, &str) -> Box<Diagnostic> + 'a;

/// What `vllm serve` loads and in which formats: the checkpoint (the deployment's
/// `model_source`, else the model's `hf`), on-the-fly FP8 when the weights differ from a
/// 16-bit checkpoint, the recurrent states' dtype.
fn model_plan(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    s: &crate::analysis::Scenario,
    fail: &Refusal<'_>,
) -> Result<ModelPlan, Box<Diagnostic>> {
    let m = &s.model;
    let source = d
        .model_source
        .clone()
        .or_else(|| m.hf.clone())
        .ok_or_else(|| {
            fail(
                "the model has no `hf` repository and the deployment no `model_source`".into(),
                "set `model_source = \"org/name\"` or a path",
            )
        })?;
    let quantization =
        crate::analysis::deployable::load_quantization(s).map_err(|r| fail(r.message, &r.help))?;
    let kv_cache_dtype =
        crate::analysis::deployable::kv_cache_dtype(s).map_err(|r| fail(r.message, &r.help))?;
    Ok(ModelPlan {
        name: d
            .model
            .and_then(|id| p.def(id))
            .map(|d| d.name.clone())
            .unwrap_or_default(),
        source,
        served_name: d
            .served_model_name
            .clone()
            .unwrap_or_else(|| def.name.clone()),
        weights: m.weights.clone(),
        kv_cache_dtype,
        quantization,
        mamba_ssm_cache_dtype: m
            .detail
            .state_dtype
            .as_deref()
            .filter(|_| m.has_recurrent_layers())
            .map(|d| match d {
                "fp32" => "float32",
                "fp16" => "float16",
                _ => "bfloat16",
            })
            .map(str::to_string),
        is_moe: m.is_moe(),
        parameters: m.parameters,
    })
}

/// How a deployment's processes are grouped: the launch mode, independent launch groups,
/// nodes per group, GPUs per pod and DP ranks per node.
struct LaunchShape {
    launch: LaunchMode,
    groups: u64,
    nodes_per_group: u64,
    gpus_per_pod: u64,
    dp_local: u64,
    per_node: u64,
    nodes_per_dp_rank: u64,
}

/// The analysis's launch shape ([`crate::analysis::deployable::launch_shape`], the rule
/// the checker and the planner apply) in the IR's terms; a refusal is E0801 here too, so
/// lowering never fails silently on a scenario that skipped the analysis.
fn launch_shape(
    s: &crate::analysis::Scenario,
    fail: &Refusal<'_>,
) -> Result<LaunchShape, Box<Diagnostic>> {
    use crate::analysis::deployable::{self, LaunchKind};
    let shape = deployable::launch_shape(s, s.layout).map_err(|r| fail(r.message, &r.help))?;
    Ok(LaunchShape {
        launch: match shape.kind {
            LaunchKind::Replicas => LaunchMode::Replicas,
            LaunchKind::DataParallel => LaunchMode::DataParallel,
            LaunchKind::MultiNode if s.engine.ray => LaunchMode::MultiNodeRay,
            LaunchKind::MultiNode => LaunchMode::MultiNode,
        },
        groups: shape.groups,
        nodes_per_group: shape.nodes_per_group,
        gpus_per_pod: shape.gpus_per_pod,
        dp_local: shape.dp_local,
        per_node: shape.per_node,
        nodes_per_dp_rank: shape.nodes_per_dp_rank,
    })
}

/// The node of node group `group` of `cluster` (the group a scenario runs on; each group
/// of a mixed cluster has its own node, GPU and network).
fn group_node(
    p: &Program,
    cluster: Option<crate::program::DefId>,
    group: usize,
) -> Option<&crate::program::Node> {
    let c = p.cluster(cluster?)?;
    p.node(c.groups.get(group)?.node)
}

/// The GPU of the deployment's node group as the device plugin and GPU Feature Discovery
/// name it; W0801 when it names no NVIDIA product (the pods then get no GPU node affinity).
fn gpu_plan(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    group: usize,
    t: &crate::analysis::Topology,
    warnings: &mut Vec<Diagnostic>,
) -> GpuPlan {
    let gpu_def = group_node(p, d.cluster, group)
        .and_then(|n| n.gpu)
        .and_then(|id| p.def(id));
    let gpu_body = gpu_def.and_then(|g| match &g.body {
        Body::Gpu(x) => Some(x),
        _ => None,
    });
    let amd = t.gpu.rocm;
    let product_labels = if amd {
        Vec::new()
    } else {
        gpu_body.map(gpu_product_labels).unwrap_or_default()
    };
    if product_labels.is_empty() && !amd {
        let gpu_at = gpu_def.map(|g| g.location()).unwrap_or(d.layout_at);
        warnings.push(
            Diagnostic::new(
                Code::NoProductLabel,
                format!(
                    "deploy `{}`: GPU `{}` names no NVIDIA product, so the pods get no GPU node affinity",
                    def.name, t.gpu.name
                ),
            )
            .primary(gpu_at.file, gpu_at.span, "no `names` that GPU Feature Discovery reports")
            .help("add the name `nvidia-smi` prints, e.g. `names = [\"NVIDIA H100 80GB HBM3\"]`: nodes carry it as the `nvidia.com/gpu.product` label"),
        );
    }
    GpuPlan {
        name: t.gpu.name.clone(),
        product_labels,
        resource: if amd { "amd.com/gpu" } else { "nvidia.com/gpu" }.to_string(),
        memory_bytes: t.gpu.memory as u64,
    }
}

/// The variable NixlConnector needs to move a hybrid model's recurrent states between the
/// pools: `VLLM_SSM_CONV_STATE_LAYOUT=DS` on both (`NixlBaseConnectorWorker.__init__`
/// asserts "3-read Mamba conv transfer requires DS conv state layout"; docs/vllm-rules.md
/// row 64). Added to each pool's environment unless the user set the variable.
pub const SSM_CONV_STATE_LAYOUT: (&str, &str) = ("VLLM_SSM_CONV_STATE_LAYOUT", "DS");

fn conv_state_layout_for_nixl(m: &crate::program::Model, env: &mut Vec<(String, String)>) {
    let recurrent = m.has_recurrent_layers();
    let (name, value) = SSM_CONV_STATE_LAYOUT;
    if recurrent && !env.iter().any(|(k, _)| k == name) {
        env.push((name.to_string(), value.to_string()));
    }
}

/// The engine options as resolved for the scenario (vLLM's defaults filled in), with the
/// user's own `extra_args` and environment.
fn engine_plan(
    d: &crate::program::Deploy,
    engine: &crate::analysis::scenario::EngineSettings,
) -> EnginePlan {
    EnginePlan {
        gpu_memory_utilization: engine.gpu_memory_utilization,
        max_model_len: engine.max_model_len,
        max_num_seqs: engine.max_num_seqs,
        max_num_batched_tokens: engine.max_num_batched_tokens,
        block_size: engine.block_size,
        enforce_eager: engine.enforce_eager,
        cudagraph_mode: d
            .engine
            .cudagraph_mode
            .as_ref()
            .map(|_| engine.cudagraph_mode.vllm_name().to_string()),
        kv_cache_memory_bytes: engine.kv_cache_memory.map(|b| b as u64),
        cpu_offload_gib: (engine.cpu_offload > 0.0).then(|| engine.cpu_offload / GIB as f64),
        enable_prefix_caching: engine.enable_prefix_caching,
        port: engine.port,
        all2all_backend: engine.all2all_backend.clone(),
        dbo: engine.dbo,
        speculative: engine.speculative.as_ref().map(|sp| SpeculativePlan {
            method: sp.method.clone(),
            model: sp.source.clone(),
            tokens: sp.tokens,
        }),
        lora: d.lora.clone(),
        kv_offload: d.kv_offload.clone(),
        extra_args: d.engine.extra_args.clone(),
        env: d.engine.env.clone(),
    }
}

/// The pods' settings: image, secrets, `/dev/shm`, the startup probe's allowance, CPU and
/// memory (the user's, else dic's rules), the model cache, autoscaling and monitoring.
fn kubernetes_plan(
    p: &Program,
    d: &crate::program::Deploy,
    group: usize,
    a: &Analysis,
    s: &crate::analysis::Scenario,
    shape: &LaunchShape,
) -> KubernetesPlan {
    let gpus_per_pod = shape.gpus_per_pod;
    let weights_total =
        a.memory.stages.iter().map(|st| st.weights).sum::<f64>() * s.layout.tp as f64;
    let shm = crate::analysis::kv_offload::pod_shm_bytes(gpus_per_pod);
    let node = group_node(p, d.cluster, group);
    let node_memory = node.and_then(|n| n.cpu_memory);
    // The CUDA image finds no device on an AMD GPU: vLLM's ROCm build is its own image.
    let default_image = if s.topology.gpu.rocm {
        ROCM_IMAGE
    } else {
        DEFAULT_IMAGE
    };
    KubernetesPlan {
        namespace: d.namespace.clone(),
        image: d.image.clone().unwrap_or_else(|| default_image.into()),
        hf_token_secret: d
            .hf_token_secret
            .clone()
            .unwrap_or_else(|| "hf-token".into()),
        api_key_secret: d.api_key_secret.clone(),
        preflight_image: d.preflight_image.clone(),
        shm_bytes: shm,
        startup_seconds: (STARTUP_FIXED_SECONDS + weights_total / STARTUP_LOAD_BYTES_PER_SECOND)
            .ceil() as u64,
        cpu: d.pod.cpu.unwrap_or_else(|| pod_cpu(gpus_per_pod)),
        memory_bytes: d.pod.memory.map(|b| b as u64).unwrap_or_else(|| {
            pod_memory(
                gpus_per_pod,
                shm,
                // Host memory per GPU: offloaded weights and the engine's offloaded KV
                // blocks, spread over its GPUs.
                s.engine.cpu_offload as u64
                    + d.kv_offload.as_ref().map_or(0, |k| {
                        (k.size / (s.layout.tp * s.layout.pp).max(1) as f64) as u64
                    }),
                node_memory.map(|m| {
                    crate::analysis::kv_offload::pod_memory_cap(m, gpus_per_pod, shape.per_node)
                }),
            )
        }),
        checkpoint_bytes: checkpoint_bytes(&s.model),
        pod: d.pod.clone(),
        model_cache: d.model_cache.clone(),
        autoscale: d.autoscale.clone(),
        monitoring: d.monitoring.clone(),
        gateway: d
            .routing
            .as_ref()
            .map(|r| super::gateway::gateway_plan(r, s)),
        disruption: None,
    }
}

/// The disruption budget and rollout from the search's N−1 figures for the layout
/// deployed: the chosen one's when it is the planner's choice, else the written one's (`shared`:
/// another deployment runs on its cluster).
fn disruption_of(
    planned: &Planned<'_>,
    s: &crate::analysis::Scenario,
    shared: bool,
) -> Option<super::Disruption> {
    // A split's pools are predicted as a pair, not as independent replicas
    // ([`pool_disruption`]).
    if planned.scenario.pool.is_some() {
        return None;
    }
    let f = crate::planner::failure::of_deployed(planned.search?, s)?;
    // N−1 counts the GPUs spare beside this deployment only: on a cluster other
    // deployments share, a surge replica may find none, so none is planned.
    let f = crate::planner::Failure {
        surge: if shared { 0 } else { f.surge },
        ..f.clone()
    };
    Some(super::Disruption::from_failure(&f))
}

/// A split's pool (`s`, its part `part`): the PodDisruptionBudget and rollout from the
/// pair's N−1 (`f`): as many of this pool's replicas down as leave the pair carrying the
/// offered load with the other pool whole; a surge replica where its node group has the
/// GPUs of one spare beside both pools (none on a cluster another deployment shares).
fn pool_disruption(
    part: &crate::analysis::PoolPart,
    s: &crate::analysis::Scenario,
    f: &crate::planner::PoolFailure,
    shared: bool,
) -> super::Disruption {
    let budget = match part.pool {
        crate::program::Pool::Prefill => f.disruption_budget.prefill,
        crate::program::Pool::Decode => f.disruption_budget.decode,
    };
    let used = if part.same_group {
        s.layout.gpus() + part.peer.layout.gpus()
    } else {
        s.layout.gpus()
    };
    let spare = s.topology.total_gpus().saturating_sub(used);
    let surge = u64::from(!shared && spare >= s.layout.replica_gpus());
    super::Disruption::sized(budget, surge)
}

/// Whether another deployment of the program runs on `d`'s cluster.
fn cluster_shared(p: &Program, d: &crate::program::Deploy) -> bool {
    p.defs
        .iter()
        .flatten()
        .filter(|def| matches!(&def.body, Body::Deploy(o) if o.cluster == d.cluster))
        .count()
        > 1
}

/// A pool's launch facts: its role, its peer, the connector and the router's port.
fn disagg_plan(
    deployment: &str,
    s: &crate::analysis::Scenario,
    part: &crate::analysis::PoolPart,
    port: u64,
) -> DisaggPlan {
    use crate::program::Pool;
    DisaggPlan {
        deployment: deployment.to_string(),
        role: part.pool,
        peer: format!(
            "{deployment}-{}",
            match part.pool {
                Pool::Prefill => Pool::Decode,
                Pool::Decode => Pool::Prefill,
            }
            .name()
        ),
        kv_transfer_config: KV_TRANSFER_CONFIG.to_string(),
        crosses_nodes: part.crosses_nodes(s),
        router_port: port,
        prefill_servers: Vec::new(),
        decode_servers: Vec::new(),
        peer_spans_nodes: false,
    }
}

/// What NCCL must use between the nodes of a group that spans nodes: multi-node NVLink
/// inside one NVLink domain, else the scale-out fabric's transport (verbs for InfiniBand
/// and RoCE, the libfabric plugin for EFA, sockets for plain Ethernet).
fn fabric_transport(t: &crate::analysis::Topology, nodes_per_group: u64) -> Option<String> {
    use crate::program::LinkType;
    if nodes_per_group <= 1 {
        return None;
    }
    if t.scale_up.is_some() && t.scale_up_domain > t.gpus_per_node {
        return Some("nvlink".into());
    }
    let kind = match t.scale_out.as_ref()?.link.link_type {
        LinkType::Infiniband | LinkType::Roce => "net-ib",
        LinkType::Efa => "net-ofi",
        LinkType::Ethernet => "net-socket",
        _ => return None,
    };
    Some(kind.into())
}

/// The group index of a deployment's first share (the one that carries its Service).
fn first_share_group(p: &Program, ds: &DeploymentScenario) -> usize {
    let Some(Body::Deploy(d)) = p.def(ds.deploy).map(|d| &d.body) else {
        return ds.group;
    };
    crate::analysis::cluster::pinned_group(p, d)
        .unwrap_or(0)
        .min(ds.group)
}

/// Moves the analysis's rank placement (replicas packed from node 0, GPU 0) onto the GPUs
/// and nodes the cluster's accounting gave each replica: every rank's node becomes the
/// deployment's own index of a cluster node (`cluster_nodes` names them), GPUs on a
/// shared node are offset past the other deployments', and each replica's server gets
/// its port. Scripts, the NCCL plan and the report read the moved placement.
fn place_on_cluster(
    plan: &mut DeploymentPlan,
    slots: &[crate::analysis::allocation::Slot],
    node: &str,
) {
    let per_replica = plan.layout.replica_gpus().max(1) as usize;
    let whole = plan.launch == LaunchMode::DataParallel;
    let mut nodes: Vec<(usize, u64)> = Vec::new();
    let index_of = |group: usize, n: u64, nodes: &mut Vec<(usize, u64)>| -> u64 {
        match nodes.iter().position(|&x| x == (group, n)) {
            Some(i) => i as u64,
            None => {
                nodes.push((group, n));
                (nodes.len() - 1) as u64
            }
        }
    };
    let chunks: Vec<&mut [RankPlacement]> = if whole {
        vec![plan.comm.ranks.as_mut_slice()]
    } else {
        plan.comm.ranks.chunks_mut(per_replica).collect()
    };
    for (chunk, slot) in chunks.into_iter().zip(slots) {
        let base_node = chunk.first().map(|r| r.node).unwrap_or(0);
        for (j, r) in chunk.iter_mut().enumerate() {
            if slot.nodes == 1 && !whole {
                r.node = index_of(slot.group, slot.node, &mut nodes);
                r.local_gpu = slot.first_gpu + j as u64;
            } else {
                r.node = index_of(slot.group, slot.node + (r.node - base_node), &mut nodes);
            }
        }
    }
    plan.replica_ports = slots.iter().map(|s| s.port).collect();
    plan.cluster_nodes = nodes.iter().map(|&(_, n)| format!("{node}-{n}")).collect();
    plan.nodes = plan.cluster_nodes.len() as u64;
}

/// The `nvidia.com/gpu.product` values a GPU's nodes carry: GPU Feature Discovery labels
/// each node with the NVML device name, spaces replaced by `-` (`NVIDIA H100 80GB HBM3` →
/// `NVIDIA-H100-80GB-HBM3`). The stdlib lists NVML's names first and informal aliases
/// after; only names NVML prints (`NVIDIA …`, `Tesla …`) can be labels.
pub(super) fn gpu_product_labels(g: &crate::program::Gpu) -> Vec<String> {
    g.names
        .iter()
        .filter(|n| n.starts_with("NVIDIA ") || n.starts_with("Tesla "))
        .map(|n| n.trim().replace(' ', "-"))
        .filter(|v| crate::text_rules::label_value(v).is_ok())
        .collect()
}

/// Bytes of the checkpoint on disk: every parameter in its served format (a pre-quantized
/// checkpoint), or in the checkpoint's dtype when vLLM quantizes while loading; 5% for
/// scales, tokenizer and config files. What a pod downloads into its model cache.
fn checkpoint_bytes(m: &crate::program::Model) -> u64 {
    let dtype = if m.prequantized || m.weights == m.dtype {
        m.weights.as_str()
    } else {
        m.dtype.as_str()
    };
    let bytes_per_param = crate::analysis::memory::weight_bytes(dtype);
    (m.parameters * bytes_per_param * 1.05) as u64
}

/// The network profile of a deployment's cluster (the cluster's, else its node group's
/// node's).
pub(super) fn t_network(
    p: &Program,
    cluster: Option<crate::program::DefId>,
    group: usize,
) -> NetworkPlan {
    let c = cluster.and_then(|id| p.cluster(id));
    let node_net = group_node(p, cluster, group).and_then(|n| n.network);
    let id = c.and_then(|c| c.network).or(node_net);
    match id.and_then(|id| p.network(id)) {
        Some(n) => NetworkPlan {
            rdma_resource: n
                .resource
                .clone()
                .filter(|_| n.resource_count > 0)
                .map(|r| (r, n.resource_count)),
            capabilities: n.capabilities.clone(),
            annotations: n.annotations.clone(),
            env: n.env.clone(),
            socket_ifname: n.socket_ifname.clone(),
            host_network: n.host_network,
        },
        None => NetworkPlan {
            rdma_resource: None,
            capabilities: Vec::new(),
            annotations: Vec::new(),
            env: Vec::new(),
            socket_ifname: None,
            host_network: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::Disruption;
    use crate::planner::Failure;

    fn failure(replicas: u64, budget: u64, surge: u64) -> Failure {
        Failure {
            replicas,
            offered: 20.0,
            per_replica: 2.74,
            rollout_unavailable: 1,
            during_rollout: 2.74 * (replicas - 1) as f64,
            node_replicas: Some(4),
            after_node_loss: Some(2.74 * replicas.saturating_sub(4) as f64),
            replicas_needed: 12,
            disruption_budget: budget,
            surge,
            unit: crate::planner::LoadUnit::RequestsPerSecond,
            one_engine: false,
        }
    }

    /// The budget is N−1's; a rollout takes as many down, or surges one when none may go
    /// and the GPUs are spare, else takes one down (Kubernetes refuses 0 and 0).
    #[test]
    fn the_rollout_and_budget_follow_n_minus_1() {
        let d = |r, b, s| Disruption::from_failure(&failure(r, b, s));
        let at = |x: Disruption| (x.budget, x.rollout_max_unavailable, x.rollout_max_surge);
        assert_eq!(at(d(12, 4, 1)), (4, 4, 0));
        assert_eq!(at(d(8, 0, 1)), (0, 0, 1));
        assert_eq!(at(d(8, 0, 0)), (0, 1, 0));
    }
}
