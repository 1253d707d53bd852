//! The vLLM target: `vllm serve` command lines per node, as `commands.json` (a list of
//! `{node_rank, argv, env}`) and one bash launch script per node.
//!
//! Launch modes (../shared/reference/vllm-0.33.md §3): one process per replica when a
//! replica fits a node (GPUs pinned with CUDA_VISIBLE_DEVICES, one port per replica);
//! vLLM's native multi-node launcher (`--nnodes --node-rank --master-addr`, `--headless`
//! on non-head nodes) or Ray (`ray start` lines + `--distributed-executor-backend ray`)
//! when a replica spans nodes; vLLM data parallelism (`--data-parallel-*`) for wide
//! expert parallelism. Every flag is emitted explicitly so vLLM and dic's memory model
//! agree, in vLLM's canonical dashed spelling.

use crate::shell::{line, quote, Arg};
use dic_compiler::ir::{
    DeploymentPlan, LaunchMode, DP_RPC_PORT, MASTER_PORT, NIXL_SIDE_CHANNEL_PORT, RAY_PORT,
};

const _: () = assert!(RAY_PORT == 6379, "RAY_ADDRESS_SUFFIX spells the port");
use serde::Serialize;
use std::collections::BTreeMap;

/// Environment variable the operator sets on every node to the head node's address.
pub const HEAD_ADDR: &str = "DIC_HEAD_ADDR";

/// One process to start on one node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCommand {
    pub node_rank: u64,
    pub argv: Vec<Arg>,
    pub env: BTreeMap<String, String>,
    /// Runs to completion before the next command of the node (e.g. `ray start`).
    #[serde(skip)]
    pub blocking: bool,
}

fn flag(argv: &mut Vec<Arg>, name: &str, value: impl ToString) {
    argv.push(Arg::lit(name));
    argv.push(Arg::lit(value.to_string()));
}

/// `vllm serve MODEL` with the flags that do not depend on the node: the layout, the
/// model's formats, then every engine option with the value dic resolved
/// ([`EnginePlan::option_words`](dic_compiler::ir::EnginePlan::option_words)), so vLLM
/// and dic's memory model agree. `port` is the replica's own port.
fn serve(d: &DeploymentPlan, port: u64) -> Vec<Arg> {
    use dic_compiler::ir::EnginePlan;
    // The replica's own port, through the same table as every other option.
    let e = EnginePlan {
        port,
        ..d.engine.clone()
    };
    let mut a = vec![
        Arg::lit("vllm"),
        Arg::lit("serve"),
        Arg::lit(&d.model.source),
    ];
    flag(&mut a, "--served-model-name", &d.model.served_name);
    flag(&mut a, "--tensor-parallel-size", d.layout.tp);
    if d.layout.pp > 1 {
        flag(&mut a, "--pipeline-parallel-size", d.layout.pp);
    }
    if d.layout.dcp > 1 {
        flag(&mut a, "--decode-context-parallel-size", d.layout.dcp);
    }
    if d.layout.pcp > 1 {
        flag(&mut a, "--prefill-context-parallel-size", d.layout.pcp);
    }
    if d.layout.ep {
        a.push(Arg::lit("--enable-expert-parallel"));
    }
    if let Some(k) = &d.model.kv_cache_dtype {
        flag(&mut a, "--kv-cache-dtype", k);
    }
    if let Some(q) = &d.model.quantization {
        flag(&mut a, "--quantization", q);
    }
    if let Some(dt) = &d.model.mamba_ssm_cache_dtype {
        flag(&mut a, "--mamba-ssm-cache-dtype", dt);
    }
    if let Some(x) = &d.disaggregated {
        flag(&mut a, "--kv-transfer-config", &x.kv_transfer_config);
    }
    a.extend(e.option_words().into_iter().map(Arg::lit));
    // The user's own options last (checked against vLLM's table; none of them is dic's).
    a.extend(d.engine.extra_args.iter().map(Arg::lit));
    a
}

/// Environment of every process: the network profile's, NCCL/Gloo interfaces when
/// several nodes talk and the profile names the interface (else NCCL and Gloo choose),
/// and quiet NCCL logs.
fn base_env(d: &DeploymentPlan) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert("NCCL_DEBUG".to_string(), "WARN".to_string());
    if let (true, Some(ifname)) = (d.nodes_per_group > 1, &d.network.socket_ifname) {
        env.insert("NCCL_SOCKET_IFNAME".into(), ifname.clone());
        env.insert("GLOO_SOCKET_IFNAME".into(), ifname.clone());
    }
    if d.disaggregated.is_some() {
        env.insert(SIDE_CHANNEL_PORT.into(), NIXL_SIDE_CHANNEL_PORT.to_string());
    }
    for (k, v) in d.network.env.iter().chain(&d.engine.env) {
        env.insert(k.clone(), v.clone());
    }
    env
}

/// NIXL's handshake port variable (the base; each worker adds its rank).
pub const SIDE_CHANNEL_PORT: &str = "VLLM_NIXL_SIDE_CHANNEL_PORT";
/// NIXL's handshake host variable: the address the other pool's engines reach this one at.
pub const SIDE_CHANNEL_HOST: &str = "VLLM_NIXL_SIDE_CHANNEL_HOST";
/// Environment variable the operator sets on every node of a disaggregated pool to the
/// node's own address (NIXL's side channel listens there for the other pool).
pub const NODE_ADDR: &str = "DIC_NODE_ADDR";

/// `:6379`, the Ray head port after the head's address.
const RAY_ADDRESS_SUFFIX: &str = ":6379";

/// A Python one-liner that blocks until the Ray cluster has `nodes` live nodes (30 min).
fn ray_wait(nodes: u64) -> String {
    format!(
        "import ray, sys, time; ray.init(address=\"auto\"); t = time.time() + 1800\n\
         while len([n for n in ray.nodes() if n[\"Alive\"]]) < {nodes}:\n    \
         (time.time() > t) and sys.exit(\"dic: the Ray cluster did not reach {nodes} nodes in 30 minutes\")\n    \
         time.sleep(5)"
    )
}

/// Every process of the deployment, in node order.
pub fn commands(d: &DeploymentPlan) -> Vec<NodeCommand> {
    let mut out = Vec::new();
    let env = base_env(d);
    let port = d.engine.port;
    match d.launch {
        LaunchMode::Replicas => {
            // One server per replica, on the GPUs the rank placement gives its ranks; the
            // k-th replica of a node listens on the k-th port.
            let per_replica = d.layout.replica_gpus().max(1) as usize;
            for (i, replica) in d.comm.ranks.chunks(per_replica).enumerate() {
                let Some(first) = replica.first() else {
                    continue;
                };
                // The cluster's accounting gives each server its port; without it the
                // k-th replica of a node takes the k-th port.
                let port = d
                    .replica_ports
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| port + first.local_gpu / d.gpus_per_pod.max(1));
                let devices: Vec<String> =
                    replica.iter().map(|k| k.local_gpu.to_string()).collect();
                let mut e = env.clone();
                e.insert("CUDA_VISIBLE_DEVICES".into(), devices.join(","));
                if d.disaggregated.is_some() {
                    // NIXL's handshake listens on the base port plus each worker's rank:
                    // servers sharing a node start past each other's GPUs.
                    e.insert(
                        SIDE_CHANNEL_PORT.into(),
                        (NIXL_SIDE_CHANNEL_PORT + first.local_gpu).to_string(),
                    );
                }
                out.push(NodeCommand {
                    node_rank: first.node,
                    argv: serve(d, port),
                    env: e,
                    blocking: false,
                });
            }
        }
        LaunchMode::MultiNode => {
            for g in 0..d.groups {
                for k in 0..d.nodes_per_group {
                    out.push(NodeCommand {
                        node_rank: g * d.nodes_per_group + k,
                        argv: native_multinode(d, NodeRank::Fixed(k)),
                        env: env.clone(),
                        blocking: false,
                    });
                }
            }
        }
        LaunchMode::MultiNodeRay => {
            for g in 0..d.groups {
                for k in 0..d.nodes_per_group {
                    let node = g * d.nodes_per_group + k;
                    if k == 0 {
                        let start = vec![
                            Arg::lit("ray"),
                            Arg::lit("start"),
                            Arg::lit("--head"),
                            Arg::lit(format!("--port={RAY_PORT}")),
                        ];
                        out.push(NodeCommand {
                            node_rank: node,
                            argv: start,
                            env: env.clone(),
                            blocking: true,
                        });
                        // vLLM sizes its world from the Ray cluster: wait for every node of the group.
                        let wait = vec![
                            Arg::lit("python3"),
                            Arg::lit("-c"),
                            Arg::lit(ray_wait(d.nodes_per_group)),
                        ];
                        out.push(NodeCommand {
                            node_rank: node,
                            argv: wait,
                            env: BTreeMap::new(),
                            blocking: true,
                        });
                        let mut a = serve(d, port);
                        flag(&mut a, "--distributed-executor-backend", "ray");
                        out.push(NodeCommand {
                            node_rank: node,
                            argv: a,
                            env: env.clone(),
                            blocking: false,
                        });
                    } else {
                        out.push(NodeCommand {
                            node_rank: node,
                            argv: ray_join(),
                            env: env.clone(),
                            blocking: false,
                        });
                    }
                }
            }
        }
        LaunchMode::DataParallel => {
            for k in 0..d.nodes_per_group {
                out.push(NodeCommand {
                    node_rank: k,
                    argv: data_parallel(d, NodeRank::Fixed(k)).1,
                    env: env.clone(),
                    blocking: false,
                });
            }
        }
    }
    out
}

/// The API port of a server in a pod. Every pod has its own network namespace, so each
/// listens on the deployment's engine port, whatever ports the cluster's accounting gave
/// the launch scripts' servers on a shared node; containerPort, probes, Service and the
/// router's upstreams on Kubernetes all take it from here.
pub fn pod_port(d: &DeploymentPlan) -> u64 {
    d.engine.port
}

/// The command of a pod that holds one whole replica (a Deployment's pod): its own
/// network namespace and GPUs, so [`pod_port`] and NIXL's base side-channel port, and no
/// `CUDA_VISIBLE_DEVICES` (the device plugin hands the pod its GPUs).
pub fn pod_command(d: &DeploymentPlan) -> NodeCommand {
    NodeCommand {
        node_rank: 0,
        argv: serve(d, pod_port(d)),
        env: base_env(d),
        blocking: false,
    }
}

/// Which node of its group a command runs as: a number fixed in a script, or one a pod
/// reads from its environment when it starts (a LeaderWorkerSet worker's
/// `LWS_WORKER_INDEX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRank {
    Fixed(u64),
    Env(&'static str),
}

/// vLLM's native multi-node launch for node `rank` of a group (`--headless` past the head).
fn native_multinode(d: &DeploymentPlan, rank: NodeRank) -> Vec<Arg> {
    let mut a = serve(d, d.engine.port);
    flag(&mut a, "--nnodes", d.nodes_per_group);
    a.push(Arg::lit("--node-rank"));
    a.push(match rank {
        NodeRank::Fixed(k) => Arg::lit(k.to_string()),
        NodeRank::Env(var) => Arg::env(var),
    });
    a.push(Arg::lit("--master-addr"));
    a.push(Arg::env(HEAD_ADDR));
    flag(&mut a, "--master-port", MASTER_PORT);
    if rank != NodeRank::Fixed(0) {
        a.push(Arg::lit("--headless"));
    }
    a
}

/// The shell variable a pod computes its data-parallel start rank into.
const DP_START_RANK: &str = "DIC_DP_START_RANK";

/// vLLM's data-parallel launch for node `rank`: shell lines to run first (a start rank
/// computed from the environment) and the command.
fn data_parallel(d: &DeploymentPlan, rank: NodeRank) -> (Vec<String>, Vec<Arg>) {
    if d.nodes_per_dp_rank > 1 {
        return (Vec::new(), data_parallel_spanning(d, rank));
    }
    let mut pre = Vec::new();
    let mut a = serve(d, d.engine.port);
    flag(&mut a, "--data-parallel-size", d.layout.dp);
    flag(&mut a, "--data-parallel-size-local", d.dp_local);
    if d.nodes_per_group > 1 {
        a.push(Arg::lit("--data-parallel-address"));
        a.push(Arg::env(HEAD_ADDR));
        flag(&mut a, "--data-parallel-rpc-port", DP_RPC_PORT);
        match rank {
            NodeRank::Fixed(0) => {}
            NodeRank::Fixed(k) => {
                flag(&mut a, "--data-parallel-start-rank", k * d.dp_local);
                a.push(Arg::lit("--headless"));
            }
            NodeRank::Env(var) => {
                pre.push(format!(
                    "{DP_START_RANK}=$(( {var} * {} ))",
                    quote(&d.dp_local.to_string())
                ));
                a.push(Arg::lit("--data-parallel-start-rank"));
                a.push(Arg::env(DP_START_RANK));
                a.push(Arg::lit("--headless"));
            }
        }
    }
    (pre, a)
}

/// vLLM 0.33's launch of DP ranks that each span `nodes_per_dp_rank` nodes: every node
/// names the whole engine (`--nnodes` over all its nodes, `--node-rank`, one torch world
/// at the head's `--master-addr`) and vLLM infers the rest (`EngineArgs.create_engine_config`:
/// one DP rank per node group, `data_parallel_rank` from the node rank;
/// `ParallelConfig.nnodes_within_dp`). Every node past the head is `--headless`:
/// the first node of each other rank runs its engine core, the others its workers
/// (`serve.run_headless`, `node_rank_within_dp > 0`).
fn data_parallel_spanning(d: &DeploymentPlan, rank: NodeRank) -> Vec<Arg> {
    let mut a = native_multinode(d, rank);
    flag(&mut a, "--data-parallel-size", d.layout.dp);
    a.push(Arg::lit("--data-parallel-address"));
    a.push(Arg::env(HEAD_ADDR));
    flag(&mut a, "--data-parallel-rpc-port", DP_RPC_PORT);
    a
}

/// The command of a node past the head of a multi-node group, whichever node it is:
/// shell lines to run first and the command (for a LeaderWorkerSet's worker template).
pub fn worker_command(d: &DeploymentPlan, rank: NodeRank) -> (Vec<String>, Vec<Arg>) {
    match d.launch {
        LaunchMode::MultiNode | LaunchMode::Replicas => (Vec::new(), native_multinode(d, rank)),
        LaunchMode::DataParallel => data_parallel(d, rank),
        LaunchMode::MultiNodeRay => (Vec::new(), ray_join()),
    }
}

/// A Ray worker joining the head's cluster.
fn ray_join() -> Vec<Arg> {
    vec![
        Arg::lit("ray"),
        Arg::lit("start"),
        Arg::Env {
            prefix: "--address=",
            var: HEAD_ADDR,
            suffix: RAY_ADDRESS_SUFFIX,
        },
        Arg::lit("--block"),
    ]
}

/// `commands.json`.
pub fn commands_json(cmds: &[NodeCommand]) -> String {
    let list: Vec<serde_json::Value> = cmds
        .iter()
        .map(|c| {
            serde_json::json!({
                "node_rank": c.node_rank,
                "argv": c.argv.iter().map(Arg::json_form).collect::<Vec<_>>(),
                "env": c.env,
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&list).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}

/// The node scripts' template (`templates/node.sh.j2`): every value it receives is already
/// quoted for bash (`shell::quote`, `shell::line`) or is dic's own text.
const NODE_SCRIPT: &str = include_str!("../templates/node.sh.j2");

/// The template environment, built once (a deployment may have thousands of nodes).
fn scripts() -> &'static minijinja::Environment<'static> {
    static ENV: std::sync::OnceLock<minijinja::Environment<'static>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut e = minijinja::Environment::new();
        e.set_trim_blocks(true);
        e.set_keep_trailing_newline(true);
        e.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        e.add_template("node.sh", NODE_SCRIPT)
            .expect("embedded template parses");
        e
    })
}

/// One command of a node script, as the template writes it.
#[derive(Serialize)]
struct ScriptCommand {
    /// `env 'NAME=value' … ` and the quoted argv.
    line: String,
    /// Runs to completion before the next (e.g. `ray start`).
    blocking: bool,
}

/// The launch script of one node: environment, a check that the head address is set when
/// needed, then its commands (several replicas run side by side and are waited for).
pub fn node_script(d: &DeploymentPlan, node: u64, mine: &[&NodeCommand]) -> Result<String, String> {
    let parallel = mine.iter().filter(|c| !c.blocking).count() > 1;
    let ports: Vec<String> = mine
        .iter()
        .filter(|c| !c.blocking)
        .filter_map(|c| port_of(&c.argv))
        .collect();
    let commands: Vec<ScriptCommand> = mine
        .iter()
        .map(|c| {
            let env: Vec<String> = c
                .env
                .iter()
                // The whole `NAME=value` word is quoted: `env` splits it at the first `=`.
                .map(|(k, v)| quote(&format!("{k}={v}")))
                .collect();
            let prefix = if env.is_empty() {
                String::new()
            } else {
                format!("env {} ", env.join(" "))
            };
            ScriptCommand {
                line: format!("{prefix}{}", line(&c.argv)),
                blocking: c.blocking,
            }
        })
        .collect();
    let ctx = minijinja::context! {
        name => quote(&d.name),
        node => node,
        nodes => d.nodes,
        cluster_node => d.cluster_nodes.get(node as usize),
        api_key => d.kubernetes.api_key_secret.is_some(),
        needs_head => mine.iter().any(|c| c.argv.iter().any(|a| a.reads(HEAD_ADDR))),
        head_addr => HEAD_ADDR,
        side_channel => d.disaggregated.as_ref().is_some_and(|x| x.crosses_nodes),
        side_channel_host => SIDE_CHANNEL_HOST,
        node_addr => NODE_ADDR,
        no_ifname => d.nodes_per_group > 1 && d.network.socket_ifname.is_none(),
        parallel => parallel,
        ports => ports,
        pool => d.disaggregated.as_ref().map(|x| minijinja::context! {
            role => x.role.name(),
            deployment => &x.deployment,
        }),
        commands => commands,
    };
    scripts()
        .get_template("node.sh")
        .and_then(|t| t.render(ctx))
        .map_err(|e| format!("vllm/node-{node}.sh: {e}"))
}

/// The `--port` value of a `vllm serve` argv.
fn port_of(argv: &[Arg]) -> Option<String> {
    argv.windows(2).find_map(|w| match (&w[0], &w[1]) {
        (Arg::Literal(f), Arg::Literal(v)) if f == "--port" => Some(v.clone()),
        _ => None,
    })
}

/// Every file of the vLLM target, by path relative to the deployment's folder.
pub fn files(d: &DeploymentPlan) -> Result<BTreeMap<String, String>, String> {
    let cmds = commands(d);
    let mut out = BTreeMap::new();
    out.insert("vllm/commands.json".into(), commands_json(&cmds));
    // Commands grouped by node once (filtering per node is quadratic at 16,384 nodes).
    let mut by_node: BTreeMap<u64, Vec<&NodeCommand>> = BTreeMap::new();
    for c in &cmds {
        by_node.entry(c.node_rank).or_default().push(c);
    }
    for node in 0..d.nodes {
        let mine = by_node.get(&node).map(Vec::as_slice).unwrap_or(&[]);
        out.insert(format!("vllm/node-{node}.sh"), node_script(d, node, mine)?);
    }
    if let Some(x) = d
        .disaggregated
        .as_ref()
        .filter(|x| x.role == dic_compiler::ir::Pool::Decode)
    {
        use crate::pd_router::{router_script, FRONT, FRONT_FILE};
        out.insert(format!("vllm/{FRONT_FILE}"), FRONT.to_string());
        out.insert("vllm/router.sh".into(), router_script(d, x)?);
    }
    Ok(out)
}
