//! What-if across GPU types (`dic plan FILE --gpus h100_sxm,h200_sxm,b200,mi300x`): the
//! deployment's cluster rebuilt on each GPU type, the planner's own search run on it, and
//! the GPU types ranked by the $ per million output tokens of the cheapest layout that
//! meets every SLO.
//!
//! The cluster on another GPU: the stdlib's node of that GPU (its GPU count, scale-up link
//! and domain, NICs) — the one of the cluster's GPUs per node where there is one — else the
//! cluster's node shape with that GPU; as many nodes as keep the cluster's GPU count. The
//! engine's batch defaults follow the GPU (vLLM sets them by GPU memory:
//! `analysis::engine_settings`). Prices: the cluster's own for its own GPU type; every
//! other type (and an unpriced cluster's own) the catalog's list price — the cheapest per
//! GPU-hour among the stdlib's nodes and instances of that GPU, scaled to the node — marked
//! as a list price with the instance it came from. A GPU without one is ranked by nothing:
//! it follows the priced ones. A GPU on which nothing meets the SLOs comes last, with why.

use super::{search_fitting_context_to, space_of, Candidate};
use crate::analysis::scenario::{engine_settings, BatchLimits, LinkSpec, ScaleOut, Topology};
use crate::analysis::{catalog, DeploymentScenario, Scenario};
use crate::program::{Body, Node, Program};
use crate::schema::Kind;
use serde::Serialize;

/// One GPU type's answer.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIf {
    /// The stdlib GPU name.
    pub gpu: String,
    /// The stdlib node whose shape the cluster took (`None`: the cluster's own shape).
    pub node: Option<String>,
    pub nodes: u64,
    pub gpus_per_node: u64,
    /// $/h per node, when known.
    pub price_per_node_hour: Option<f64>,
    /// The price is the catalog's list price (of [`WhatIf::price_from`]), not the cluster's.
    pub list_price: bool,
    /// The stdlib node or instance the list price came from.
    pub price_from: Option<String>,
    /// The cheapest layout meeting every SLO on this GPU (the planner's choice).
    pub chosen: Option<Candidate>,
    /// $/h and $ per million output tokens of the chosen layout, when it is priced: the
    /// ranking's measure.
    pub cost_per_hour: Option<f64>,
    pub cost_per_million_output: Option<f64>,
    /// Why nothing meets the SLOs on this GPU, when nothing does.
    pub why_none: Option<String>,
}

/// The stdlib's GPU names, in definition order (for a usage error).
pub fn known_gpus() -> Vec<String> {
    names_of(&catalog::stdlib().program, Kind::Gpu)
}

fn names_of(p: &Program, kind: Kind) -> Vec<String> {
    p.defs
        .iter()
        .flatten()
        .filter(|d| d.kind == kind)
        .map(|d| d.name.clone())
        .collect()
}

/// The stdlib names of `--gpus` (a stdlib or `nvidia-smi` name each), in order, without
/// repeats; `Err` names the first unknown one and the known ones.
pub fn resolve_gpus(list: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for query in list.split(',').map(str::trim).filter(|q| !q.is_empty()) {
        let Some((spec, _)) = catalog::gpu(query) else {
            return Err(format!(
                "unknown GPU `{query}` in --gpus: use stdlib names (`dic list gpus`): {}",
                known_gpus().join(", ")
            ));
        };
        if !out.contains(&spec.name) {
            out.push(spec.name);
        }
    }
    if out.is_empty() {
        return Err("--gpus needs at least one GPU name (`dic list gpus`)".into());
    }
    Ok(out)
}

/// Every GPU of `gpus` (stdlib names) for the deployment, best first: priced ones by $ per
/// million output tokens, then unpriced ones that meet the SLOs, then those where nothing
/// does.
pub fn what_if(ds: &DeploymentScenario, gpus: &[String]) -> Vec<WhatIf> {
    let space = space_of(ds);
    let mut rows: Vec<WhatIf> = gpus
        .iter()
        .filter_map(|gpu| {
            let (scenario, row) = on_gpu(&ds.scenario, gpu)?;
            let found =
                search_fitting_context_to(&scenario, &ds.slo, &space, super::Extent::Aggregated);
            Some(answered(row, &found))
        })
        .collect();
    rank(&mut rows);
    rows
}

/// `row` (from [`on_gpu`]) with the answer of `found`, the search of its scenario.
pub fn answered(mut row: WhatIf, found: &super::Search) -> WhatIf {
    row.why_none = found.chosen.is_none().then(|| why_none(found));
    let priced = found.chosen.as_ref().filter(|c| c.priced);
    row.cost_per_hour = priced.map(|c| c.cost_per_hour);
    row.cost_per_million_output = priced.and_then(|c| c.cost_per_million_output);
    row.chosen = found.chosen.clone();
    row
}

/// Priced by $/M output tokens (then $/h), then unpriced by GPUs, then nothing chosen;
/// the given order among equals.
pub fn rank(rows: &mut [WhatIf]) {
    let key = |r: &WhatIf| match (&r.chosen, r.cost_per_million_output) {
        (Some(c), Some(m)) => (0, m, c.cost_per_hour),
        (Some(c), None) => (1, c.gpus as f64, 0.0),
        (None, _) => (2, 0.0, 0.0),
    };
    rows.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.total_cmp(&kb.2))
    });
}

fn why_none(found: &super::Search) -> String {
    let closest = found.closest.as_ref().map(|c| {
        format!(
            "closest {}: {}",
            c.describe(),
            c.rejected_because.as_deref().unwrap_or("misses an SLO")
        )
    });
    let context = found
        .context
        .as_ref()
        .map(|fit| format!("{}; set `{}`", fit.sentence(), fit.setting()));
    match (closest, context) {
        (Some(a), Some(b)) => format!("{a}; {b}"),
        (Some(a), None) => a,
        (None, Some(b)) => format!("no layout fits; {b}"),
        (None, None) => match found.rejected.first() {
            Some(r) => format!("no layout fits: {}: {}", r.family, r.reason),
            None => "no layout fits".into(),
        },
    }
}

/// The scenario on `gpu` (a stdlib name) and its row before the search; `None` when the
/// stdlib has no such GPU.
pub fn on_gpu(base: &Scenario, gpu: &str) -> Option<(Scenario, WhatIf)> {
    let p = &catalog::stdlib().program;
    let t = &base.topology;
    let own = t.gpu.name == gpu;
    let mut s = base.clone();
    let node = if own {
        None
    } else {
        stdlib_node(p, gpu, t.gpus_per_node)
    };
    if !own {
        let (spec, own_link) = catalog::gpu(gpu)?;
        s.topology = retargeted(t, spec, own_link, node.as_ref().map(|(_, n)| n), p);
        retune_engine(&mut s);
    }
    let (price, list) = match t.price_per_node_hour.filter(|_| own) {
        Some(own_price) => (Some(own_price), None),
        None => match list_price(p, gpu) {
            Some((per_gpu, from)) => (Some(per_gpu * s.topology.gpus_per_node as f64), Some(from)),
            None => (None, None),
        },
    };
    s.topology.price_per_node_hour = price;
    let row = WhatIf {
        gpu: gpu.to_string(),
        node: node.map(|(name, _)| name),
        nodes: s.topology.nodes,
        gpus_per_node: s.topology.gpus_per_node,
        price_per_node_hour: price,
        list_price: list.is_some(),
        price_from: list,
        chosen: None,
        cost_per_hour: None,
        cost_per_million_output: None,
        why_none: None,
    };
    Some((s, row))
}

/// The cluster `t` with `spec` for its GPU: the stdlib `node`'s shape where there is one,
/// else `t`'s; as many nodes as keep `t`'s GPU count.
fn retargeted(
    t: &Topology,
    spec: crate::analysis::scenario::GpuSpec,
    own_link: Option<LinkSpec>,
    node: Option<&Node>,
    p: &Program,
) -> Topology {
    let link = |id| match &p.def(id)?.body {
        Body::Link(l) => Some(LinkSpec::from_link(&p.def(id)?.name, l)),
        _ => None,
    };
    let per_node = node.map_or(t.gpus_per_node, |n| n.gpu_count).max(1);
    let scale_up = match node {
        Some(n) => n.scale_up.and_then(link),
        None => catalog::node_scale_up(&spec.name, per_node).or(own_link),
    };
    let scale_out = node
        .and_then(|n| n.nics)
        .and_then(|(count, id)| {
            Some(ScaleOut {
                nics: count,
                link: link(id)?,
            })
        })
        .or_else(|| t.scale_out.clone());
    Topology {
        gpus_per_node: per_node,
        nodes: t.total_gpus().div_ceil(per_node).max(1),
        scale_up_domain: node.map_or(per_node, |n| n.scale_up_domain.max(per_node)),
        scale_up,
        scale_out,
        price_per_node_hour: None,
        // The new node's host memory where the stdlib states it; else the cluster's.
        cpu_memory: node.map_or(t.cpu_memory, |n| n.cpu_memory),
        gpu: spec,
    }
}

/// vLLM's batch defaults for the new GPU (written limits stand), settled as the
/// deployment's were.
fn retune_engine(s: &mut Scenario) {
    s.topology.gpu.resolve_auto_kv_cache(&mut s.model);
    if s.engine.batch == BatchLimits::default() {
        return; // limits given whole: nothing to settle
    }
    let fresh = engine_settings(&s.model, &s.topology.gpu, &Default::default());
    s.engine.batch.default_seqs = fresh.batch.default_seqs;
    s.engine.batch.default_tokens = fresh.batch.default_tokens;
    crate::analysis::deepep::apply_layout_defaults(s);
}

/// The stdlib node of `gpu` whose shape a cluster of `per_node`-GPU nodes takes: one of
/// `per_node` GPUs where there is one, else the first defined.
fn stdlib_node(p: &Program, gpu: &str, per_node: u64) -> Option<(String, Node)> {
    let nodes = nodes_of(p, gpu);
    nodes
        .iter()
        .find(|(_, n)| n.gpu_count == per_node)
        .or_else(|| nodes.first())
        .cloned()
}

/// The stdlib's nodes and instances of `gpu`, in definition order.
fn nodes_of(p: &Program, gpu: &str) -> Vec<(String, Node)> {
    p.defs
        .iter()
        .flatten()
        .filter_map(|d| match &d.body {
            Body::Node(n) if p.def(n.gpu?)?.name == gpu => Some((d.name.clone(), n.clone())),
            _ => None,
        })
        .collect()
}

/// The catalog's cheapest price per GPU-hour for `gpu` and the node or instance it is
/// from; `None` when no stdlib node of it carries a price.
pub fn list_price(p: &Program, gpu: &str) -> Option<(f64, String)> {
    nodes_of(p, gpu)
        .into_iter()
        .filter_map(|(name, n)| Some((n.price? / n.gpu_count.max(1) as f64, name)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_gpus_name_the_known_ones() {
        let e = resolve_gpus("h100_sxm,h900").unwrap_err();
        assert!(
            e.contains("`h900`") && e.contains("b200") && e.contains("mi300x"),
            "{e}"
        );
        assert_eq!(
            resolve_gpus("h100_sxm, NVIDIA H200,h100_sxm").unwrap(),
            vec!["h100_sxm", "h200_sxm"]
        );
        assert!(resolve_gpus(" , ").is_err());
    }

    #[test]
    fn list_prices_come_from_the_cheapest_instance_per_gpu() {
        let p = &catalog::stdlib().program;
        // lambda_8x_h100_sxm: $31.92/h ÷ 8 = $3.99 per GPU-hour, under lambda's 1-GPU
        // $4.29, AWS p5's $98.32 ÷ 8 and Azure's $98 ÷ 8.
        let (h100, from) = list_price(p, "h100_sxm").unwrap();
        assert!((h100 - 3.99).abs() < 1e-9 && from == "lambda_8x_h100_sxm");
        // No stdlib node of MI300X carries a price.
        assert!(list_price(p, "mi300x").is_none());
    }

    /// Llama 3.1 70B FP8 on two unpriced DGX H100 nodes, 20 req/s of 2k → 512 tokens.
    fn deployment() -> DeploymentScenario {
        let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b { weights = fp8, kv_cache = fp8 }\n\
cluster c { nodes = 2 × dgx_h100 }\n\
workload w { prompt = 2k tokens, output = 512 tokens, rate = 20 req/s }\n\
slo s { ttft.p95 <= 800 ms, tpot.p95 <= 40 ms }\n\
deploy d { model = m, cluster = c, workload = w, slo = s, layout = auto, engine = vllm { max_model_len = 8k tokens } }\n";
        let world = crate::source::MemoryWorld::new().with("p.dist", src);
        let mut session = crate::resolve::Session::new(&world);
        session.load_root("p.dist").expect("readable");
        let front = crate::front::check_session(session);
        assert!(front.diagnostics.is_empty(), "{:?}", front.diagnostics);
        crate::analysis::scenarios_from_program(&front.program).remove(0)
    }

    #[test]
    fn ranks_gpus_by_cost_per_million_output_tokens() {
        let gpus: Vec<String> = ["h100_sxm", "h200_sxm", "b200", "mi300x"]
            .map(String::from)
            .to_vec();
        let rows = what_if(&deployment(), &gpus);
        let order: Vec<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
        // Each carries the offered 20 req/s × 512 output tokens = 10,240 tok/s, so
        // $/M tokens = $/h ÷ (10,240 × 3,600) × 1e6 = $/h ÷ 36.864:
        // - b200: lambda_8x_b200 lists $53.52/h per 8-GPU node; the planner's choice
        //   `tp 1 × dp 6` fits one node: $53.52/h ÷ 36.864 = $1.4518/M.
        // - h200_sxm: p5e_48xlarge lists $43.26/h per node (its Capacity Blocks price);
        //   `tp 2 × dp 8` takes both nodes: $86.52/h ÷ 36.864 = $2.3470/M.
        // - h100_sxm (the cluster's own GPU, unpriced): lambda_8x_h100_sxm's $31.92/h ×
        //   2 nodes = $63.84/h ÷ 36.864 = $1.7318/M — between the two.
        // - mi300x: no stdlib node of it has a price; it meets the SLOs, so it follows.
        assert_eq!(order, ["b200", "h100_sxm", "h200_sxm", "mi300x"]);
        for (gpu, per_hour, per_million) in [("b200", 53.52, 1.4518), ("h200_sxm", 86.52, 2.3470)] {
            let r = rows.iter().find(|r| r.gpu == gpu).unwrap();
            let c = r.chosen.as_ref().unwrap();
            assert!(r.list_price, "{gpu}");
            let tokens = c.output_tokens_per_s.unwrap();
            assert!((tokens - 10_240.0).abs() < 1.0, "{gpu}: {tokens}");
            assert!(
                (c.cost_per_hour - per_hour).abs() < 1e-9,
                "{gpu}: {}",
                c.cost_per_hour
            );
            let m = r.cost_per_million_output.unwrap();
            assert!((m - per_million).abs() < 1e-4, "{gpu}: {m}");
            assert!((m - c.cost_per_hour / (tokens * 3600.0) * 1e6).abs() < 1e-12);
        }
        assert_eq!(rows[1].price_from.as_deref(), Some("lambda_8x_h100_sxm"));
        let mi = &rows[3];
        assert!(mi.chosen.is_some() && mi.price_per_node_hour.is_none() && !mi.list_price);
        assert_eq!(mi.node.as_deref(), Some("mi300x_8"));
    }

    #[test]
    fn the_clusters_own_price_stays_with_its_own_gpu() {
        let mut ds = deployment();
        ds.scenario.topology.price_per_node_hour = Some(55.04);
        let (own, row) = on_gpu(&ds.scenario, "h100_sxm").unwrap();
        assert_eq!(own, {
            let mut s = ds.scenario.clone();
            s.topology.price_per_node_hour = Some(55.04);
            s
        });
        assert!(!row.list_price && row.price_per_node_hour == Some(55.04));
        // Another GPU is not priced at the H100 nodes' price.
        let (b200, row) = on_gpu(&ds.scenario, "b200").unwrap();
        assert!(row.list_price && row.price_per_node_hour == Some(53.52));
        assert_eq!(b200.topology.gpu.name, "b200");
        assert_eq!((b200.topology.nodes, b200.topology.gpus_per_node), (2, 8));
        assert_eq!(row.node.as_deref(), Some("dgx_b200"));
        // vLLM's token budget follows the GPU's memory (B200 ≥ 160 GiB).
        assert!(b200.engine.max_num_batched_tokens >= ds.scenario.engine.max_num_batched_tokens);
    }
}
