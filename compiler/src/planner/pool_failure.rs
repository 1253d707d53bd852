//! N−1 for a disaggregated deployment's two pools: whether the prefill and decode pools
//! still carry the load within the SLOs with one prefill replica down (the prefill pool's
//! rolling update, or one of its replicas lost), with one decode replica down, and after
//! losing the node whose replicas of either pool leave the least (one node may hold
//! replicas of both). Each from the pair's own prediction (`disagg::predict_written`) with
//! the replicas left: under an open loop the pair's goodput (`goodput::written_pair`),
//! under a closed loop the most clients it holds with every latency bound met. W0410 names
//! the pool whose loss breaks the SLOs and the replicas of each pool that hold through all
//! three.

use super::failure::{beyond_cluster, clients_before_break, with_clients, LoadUnit};
use super::goodput;
use crate::analysis::disagg::{predict_written, PoolSplit};
use crate::analysis::perf::FITTED;
use crate::analysis::rules::{Anchor, Finding, SloTarget};
use crate::analysis::{Analysis, Load, PoolPart, Scenario};
use crate::diagnostics::Code;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;

/// Replicas added to the pools, one at a time, before the search for the counts that hold
/// gives up (`PoolFailure::needed` is then `None`).
const MOST_ADDED: u64 = 16;

/// Replicas of each pool: those an event takes down, or a pair's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReplicas {
    pub prefill: u64,
    pub decode: u64,
}

/// A lost node: the replicas of each pool on it, and the load the rest carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoss {
    pub lost: PoolReplicas,
    pub carried: f64,
}

/// A disaggregated deployment's capacity within the SLOs with replicas of its pools gone,
/// every load in `unit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolFailure {
    pub unit: LoadUnit,
    pub offered: f64,
    pub replicas: PoolReplicas,
    /// What the pools as written carry within the SLOs.
    pub carried: f64,
    /// With one prefill replica down.
    pub prefill_down: f64,
    /// With one decode replica down.
    pub decode_down: f64,
    /// The node whose loss leaves the least (`None` when both pools share one node: losing
    /// it loses everything, and no replica count helps).
    pub node: Option<NodeLoss>,
    /// The fewest replicas of each pool that hold through all three, growing the pool
    /// each broken event needs (`None`: not within [`MOST_ADDED`] more).
    pub needed: Option<PoolReplicas>,
    /// The most replicas of each pool that may be down at once, the other pool whole,
    /// with the pair still carrying the offered load within the SLOs (at most all but one
    /// of the pool): each pool's PodDisruptionBudget (`ir::launch`).
    pub disruption_budget: PoolReplicas,
}

impl PoolFailure {
    pub fn prefill_holds(&self) -> bool {
        self.prefill_down >= self.offered
    }
    pub fn decode_holds(&self) -> bool {
        self.decode_down >= self.offered
    }
    pub fn node_loss_holds(&self) -> bool {
        self.node.as_ref().is_none_or(|n| n.carried >= self.offered)
    }
    pub fn survives(&self) -> bool {
        self.prefill_holds() && self.decode_holds() && self.node_loss_holds()
    }
}

/// The written pools and what they carry with some replicas of each.
struct Pair<'a> {
    prefill: &'a Scenario,
    decode: &'a Scenario,
    same_group: bool,
    slo: &'a [SloTarget],
    unit: LoadUnit,
    /// Loads already computed, by (prefill, decode) replicas.
    known: RefCell<HashMap<(u64, u64), f64>>,
}

impl Pair<'_> {
    /// The load `n` prefill and `m` decode replicas carry within the SLOs (0 when a pool
    /// has none left).
    fn carried(&self, n: u64, m: u64) -> f64 {
        if let Some(&c) = self.known.borrow().get(&(n, m)) {
            return c;
        }
        let c = self.compute(n, m);
        self.known.borrow_mut().insert((n, m), c);
        c
    }

    /// What each node's loss takes with `n` prefill and `m` decode replicas placed
    /// ([`placement`]), distinct; none when the pools share one node (its loss is
    /// everything's, and no replica count helps).
    fn node_events(&self, n: u64, m: u64) -> Vec<PoolReplicas> {
        if self.same_group && self.prefill.topology.nodes <= 1 {
            return Vec::new();
        }
        let mut events: Vec<PoolReplicas> = placement(
            &with_replicas(self.prefill, n),
            &with_replicas(self.decode, m),
            self.same_group,
        )
        .into_iter()
        .filter(|r| r.prefill + r.decode > 0)
        .collect();
        events.sort_by_key(|r| (r.prefill, r.decode));
        events.dedup();
        events
    }

    fn compute(&self, n: u64, m: u64) -> f64 {
        if n == 0 || m == 0 {
            return 0.0;
        }
        let (ps, ds) = (
            with_replicas(self.prefill, n),
            with_replicas(self.decode, m),
        );
        match self.unit {
            LoadUnit::RequestsPerSecond => {
                goodput::written_pair(&ps, &ds, self.same_group, self.slo, 1.0, false)
                    .map_or(0.0, |g| g.requests_per_s)
            }
            LoadUnit::Clients => {
                let Some(w) = ds.workload else {
                    return 0.0;
                };
                let output = w.output.max(1.0);
                clients_before_break(|c| {
                    predict_written(
                        &with_clients(&ps, w, c),
                        &with_clients(&ds, w, c),
                        self.same_group,
                        &FITTED,
                    )
                    .is_some_and(|d| goodput::within_bounds(&d.prediction, self.slo, output))
                })
                .map_or(0.0, |c| c as f64)
            }
        }
    }
}

/// A pool with `dp` replicas.
fn with_replicas(s: &Scenario, dp: u64) -> Scenario {
    let mut v = s.clone();
    v.layout.dp = dp;
    v
}

/// Replicas of each pool on each node, placed as the cluster's accounting places a
/// deployment alone on its cluster (`analysis::allocation`: the prefill pool, then the
/// decode pool, each replica first fit inside a node or on whole free nodes); on two node
/// groups, each pool on its own nodes. A replica spanning nodes counts on each of them.
fn placement(ps: &Scenario, ds: &Scenario, same_group: bool) -> Vec<PoolReplicas> {
    let empty = PoolReplicas {
        prefill: 0,
        decode: 0,
    };
    let per_node = |s: &Scenario| s.topology.gpus_per_node.max(1);
    let nodes_of = |s: &Scenario| vec![(per_node(s), empty); s.topology.nodes as usize];
    let mut nodes = nodes_of(ps);
    let pool = |s: &Scenario| (per_node(s), s.layout.replica_gpus(), s.layout.dp.max(1));
    let (n, gpus, count) = pool(ps);
    place(&mut nodes, n, gpus, count, true);
    let mut decode_nodes = if same_group { Vec::new() } else { nodes_of(ds) };
    let decode_on = if same_group {
        &mut nodes
    } else {
        &mut decode_nodes
    };
    let (n, gpus, count) = pool(ds);
    place(decode_on, n, gpus, count, false);
    nodes
        .into_iter()
        .chain(decode_nodes)
        .map(|(_, r)| r)
        .collect()
}

/// Places `count` replicas of `gpus` on `nodes` (free GPUs, replicas held), first fit;
/// what does not fit is left out (E0408 says so).
fn place(nodes: &mut [(u64, PoolReplicas)], per_node: u64, gpus: u64, count: u64, prefill: bool) {
    let hold = |r: &mut PoolReplicas| {
        if prefill {
            r.prefill += 1;
        } else {
            r.decode += 1;
        }
    };
    let span = gpus.div_ceil(per_node).max(1) as usize;
    for _ in 0..count {
        if gpus <= per_node {
            if let Some(n) = nodes.iter_mut().find(|n| n.0 >= gpus) {
                n.0 -= gpus;
                hold(&mut n.1);
            }
            continue;
        }
        let free = |w: &[(u64, PoolReplicas)]| w.iter().all(|n| n.0 == per_node);
        if let Some(i) =
            (0..nodes.len().saturating_sub(span - 1)).find(|&i| free(&nodes[i..i + span]))
        {
            for n in &mut nodes[i..i + span] {
                n.0 = 0;
                hold(&mut n.1);
            }
        }
    }
}

/// N−1 for the pools of a disaggregated deployment (`ps`, `ds`: the pools as written,
/// `dp` their replicas); `None` without a workload or when the pools carry nothing
/// within the SLOs.
pub fn pool_failure(
    ps: &Scenario,
    ds: &Scenario,
    same_group: bool,
    slo: &[SloTarget],
) -> Option<PoolFailure> {
    let w = ds.workload?;
    let (offered, unit) = match w.load {
        Load::Rate(r) => (r, LoadUnit::RequestsPerSecond),
        Load::Concurrency(n) => (n as f64, LoadUnit::Clients),
    };
    let pair = Pair {
        prefill: ps,
        decode: ds,
        same_group,
        slo,
        unit,
        known: RefCell::new(HashMap::new()),
    };
    let (x, y) = (ps.layout.dp.max(1), ds.layout.dp.max(1));
    let carried = pair.carried(x, y);
    if carried <= 0.0 {
        return None;
    }
    let events = pair.node_events(x, y);
    let node = events
        .iter()
        .map(|&lost| NodeLoss {
            lost,
            carried: pair.carried(
                x.saturating_sub(lost.prefill),
                y.saturating_sub(lost.decode),
            ),
        })
        .min_by(|a, b| a.carried.total_cmp(&b.carried));
    Some(PoolFailure {
        unit,
        offered,
        replicas: PoolReplicas {
            prefill: x,
            decode: y,
        },
        carried,
        prefill_down: pair.carried(x - 1, y),
        decode_down: pair.carried(x, y - 1),
        node,
        needed: needed(&pair, offered, (x, y)),
        disruption_budget: PoolReplicas {
            prefill: most_down(x, |k| pair.carried(x - k, y) >= offered),
            decode: most_down(y, |k| pair.carried(x, y - k) >= offered),
        },
    })
}

/// The most of a pool's `replicas` that may be down at once while `holds` (with that many
/// down), counting up from one; at most all but one.
fn most_down(replicas: u64, holds: impl Fn(u64) -> bool) -> u64 {
    (1..replicas).take_while(|&k| holds(k)).last().unwrap_or(0)
}

/// The fewest replicas of each pool, from the written counts up, that hold through one
/// prefill replica down, one decode replica down and each node's loss (the written
/// placement's replicas per node): each round grows the pool the first broken event
/// needs (for a node, the pool whose extra replica carries more).
fn needed(pair: &Pair<'_>, offered: f64, (mut x, mut y): (u64, u64)) -> Option<PoolReplicas> {
    let holds = |n: u64, m: u64| pair.carried(n, m) >= offered;
    for _ in 0..=MOST_ADDED {
        if !holds(x - 1, y) {
            x += 1;
        } else if !holds(x, y - 1) {
            y += 1;
        } else if let Some(e) = pair
            .node_events(x, y)
            .into_iter()
            .find(|e| !holds(x.saturating_sub(e.prefill), y.saturating_sub(e.decode)))
        {
            let (n, m) = (x.saturating_sub(e.prefill), y.saturating_sub(e.decode));
            if pair.carried(n + 1, m) >= pair.carried(n, m + 1) {
                x += 1;
            } else {
                y += 1;
            }
        } else {
            return Some(PoolReplicas {
                prefill: x,
                decode: y,
            });
        }
    }
    None
}

/// W0410 for a disaggregated deployment (on its decode pool's analysis `a`, once), from
/// the pair's N−1 `f` ([`pool_failure`] of the pools and their SLOs): a pool of two or
/// more replicas whose loss of one, or a lost node, breaks the SLOs the pair meets.
/// Names the pool, what is left, and the replicas of each pool that hold.
pub fn pools_under_failure(
    f: &PoolFailure,
    s: &Scenario,
    part: &PoolPart,
    a: &Analysis,
) -> Option<Finding> {
    let p = a.prediction.as_ref()?;
    if p.overloaded || a.slo.iter().any(|r| !r.met) || a.slo.is_empty() {
        return None;
    }
    let (ps, ds) = part.pools(s);
    // One replica per pool: no redundancy was written (as for one aggregated replica).
    if f.replicas.prefill < 2 && f.replicas.decode < 2 || f.survives() {
        return None;
    }
    let u = f.unit;
    let mut broken = Vec::new();
    for (holds, pool, of, left) in [
        (
            f.prefill_holds(),
            "prefill",
            f.replicas.prefill,
            f.prefill_down,
        ),
        (f.decode_holds(), "decode", f.replicas.decode, f.decode_down),
    ] {
        if !holds {
            broken.push(format!(
                "with 1 of the {of} {pool} replicas down (the {pool} pool's rolling update, or one lost) the pools carry {} within the SLOs",
                u.show(left)
            ));
        }
    }
    if let (false, Some(n)) = (f.node_loss_holds(), &f.node) {
        broken.push(format!(
            "losing the node that holds {} prefill and {} decode replica{} leaves {}",
            n.lost.prefill,
            n.lost.decode,
            if n.lost.decode == 1 { "" } else { "s" },
            u.show(n.carried)
        ));
    }
    let help = match f.needed {
        Some(n) => format!(
            "{} prefill and {} decode replicas hold the SLOs through each (`layout = {}`{}); or accept the risk",
            n.prefill,
            n.decode,
            PoolSplit {
                prefill: crate::program::Layout { dp: 1, ..ps.layout },
                prefill_replicas: n.prefill,
                decode: crate::program::Layout { dp: 1, ..ds.layout },
                decode_replicas: n.decode,
            }
            .as_layout(),
            beyond_cluster(
                n.prefill * ps.layout.replica_gpus() + n.decode * ds.layout.replica_gpus(),
                if part.same_group {
                    ps.topology.total_gpus()
                } else {
                    ps.topology.total_gpus() + ds.topology.total_gpus()
                }
            )
        ),
        None => format!(
            "no count within {MOST_ADDED} more replicas holds; `dic plan` lists the splits and aggregated layouts"
        ),
    };
    Some(Finding::new(
        Code::CapacityUnderFailure,
        Anchor::Layout,
        format!(
            "the SLOs do not survive a lost replica: {}, against the {} offered (the pools as written carry {})",
            broken.join("; "),
            u.show(f.offered),
            u.show(f.carried)
        ),
        "no headroom for a rollout or a node failure",
        Some(help),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pd_70b_h200.dist's pools: Llama 3.1 70B FP8 on 2 × 8 H200, 8k prompts, 256
    /// outputs, prefill `tp 4 × dp 3`, decode `tp 2 × dp 2`; the decode pool's scenario
    /// and its part.
    fn pools(load: &str) -> (Scenario, PoolPart, Vec<SloTarget>) {
        let src = format!(
            "import std.nodes.dgx_h200\nimport std.models.llama_3_1_70b\n\
cluster h200 {{ nodes = 2 × dgx_h200, price = $60/h }}\n\
model llama = llama_3_1_70b {{ weights = fp8, kv_cache = fp8 }}\n\
workload w {{ prompt = 8k tokens, output = 256 tokens, {load} }}\n\
slo s {{ ttft.p95 <= 2 s, tpot.p50 <= 25 ms }}\n\
deploy chat {{ model = llama, cluster = h200, workload = w, slo = s, layout = {{ prefill = tp 4 × dp 3, decode = tp 2 × dp 2 }}, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        );
        let ds = crate::planner::scenarios_of_text(&src)
            .into_iter()
            .find(|d| {
                d.pool
                    .as_ref()
                    .is_some_and(|p| p.pool == crate::program::Pool::Decode)
            })
            .expect("a decode pool");
        let part = ds.pool.expect("a pool");
        (ds.scenario, part, ds.slo)
    }

    /// Each figure is the pair's goodput with the replicas left (`goodput::written_pair`):
    /// g(2, 2) with a prefill replica down, g(3, 1) with a decode replica down. First
    /// fit puts two prefill engines (4 GPUs each) on node 0 and the third beside both
    /// decode engines (2 GPUs each) on node 1: losing node 1 leaves no decode engine, 0
    /// req/s. W0410 names the pool that breaks, and the counts it gives hold.
    #[test]
    fn a_prefill_and_a_decode_pool_each_lose_one() {
        let (s, part, slo) = pools("rate = 6 req/s");
        let (ps, ds) = part.pools(&s);
        let g = |n: u64, m: u64| {
            goodput::written_pair(
                &with_replicas(ps, n),
                &with_replicas(ds, m),
                part.same_group,
                &slo,
                1.0,
                false,
            )
            .map_or(0.0, |g| g.requests_per_s)
        };
        let f = pool_failure(ps, ds, part.same_group, &slo).expect("an open loop");
        assert_eq!(f.unit, LoadUnit::RequestsPerSecond);
        assert_eq!((f.replicas.prefill, f.replicas.decode), (3, 2));
        assert_eq!((f.offered, f.carried), (6.0, g(3, 2)));
        assert!(f.carried >= 6.0, "the pools as written carry {}", f.carried);
        assert_eq!((f.prefill_down, f.decode_down), (g(2, 2), g(3, 1)));
        assert_eq!(
            f.node,
            Some(NodeLoss {
                lost: PoolReplicas {
                    prefill: 1,
                    decode: 2
                },
                carried: 0.0
            })
        );
        let n = f.needed.expect("a count that holds");
        assert!(g(n.prefill - 1, n.decode) >= 6.0 && g(n.prefill, n.decode - 1) >= 6.0);
        assert!(n.prefill + n.decode > 5, "{n:?}");
        let a = crate::analysis::analyze_pool(&s, &part, &slo);
        let w = pools_under_failure(&f, &s, &part, &a).expect("W0410");
        assert_eq!(w.code, Code::CapacityUnderFailure);
        assert_eq!(
            w.message.contains("prefill replicas down"),
            g(2, 2) < 6.0,
            "{}",
            w.message
        );
        assert_eq!(w.message.contains("decode replicas down"), g(3, 1) < 6.0);
        assert!(
            w.message.contains(
                "losing the node that holds 1 prefill and 2 decode replicas leaves 0.00 req/s"
            ),
            "{}",
            w.message
        );
        assert!(
            w.help.as_deref().is_some_and(|h| h.contains(&format!(
                "{} prefill and {} decode replicas",
                n.prefill, n.decode
            ))),
            "{:?}",
            w.help
        );
    }

    /// Each pool's disruption budget, by hand from the pair's goodput (`dic plan` on
    /// pd_70b_h200.dist): the pools carry g(2, 2) = 4.57 req/s with a prefill replica
    /// down and g(3, 1) = 4.55 req/s with a decode replica down. At 6 req/s neither
    /// holds: a budget of 0 in each pool. At 4.56 req/s a prefill replica may go (4.57 ≥
    /// 4.56) but not a decode replica (4.55 < 4.56): (1, 0).
    #[test]
    fn each_pool_may_lose_what_leaves_the_pair_the_load() {
        let (s, part, slo) = pools("rate = 6 req/s");
        let (ps, ds) = part.pools(&s);
        let f = pool_failure(ps, ds, part.same_group, &slo).expect("an open loop");
        assert!((f.prefill_down - 4.57).abs() < 0.005, "{}", f.prefill_down);
        assert!((f.decode_down - 4.55).abs() < 0.005, "{}", f.decode_down);
        assert_eq!(
            f.disruption_budget,
            PoolReplicas {
                prefill: 0,
                decode: 0
            }
        );
        let (s, part, slo) = pools("rate = 4.56 req/s");
        let (ps, ds) = part.pools(&s);
        let f = pool_failure(ps, ds, part.same_group, &slo).expect("an open loop");
        let one_decode =
            goodput::written_pair(ps, &with_replicas(ds, 1), part.same_group, &slo, 1.0, false)
                .map_or(0.0, |g| g.requests_per_s);
        assert!(one_decode < 4.56, "one decode replica carries {one_decode}");
        assert_eq!(
            f.disruption_budget,
            PoolReplicas {
                prefill: 1,
                decode: 0
            }
        );
    }

    /// A closed loop over the same pools: each figure is the most clients the pools left
    /// hold with both bounds met, by a scan of the pair's prediction.
    #[test]
    fn the_pools_under_a_closed_loop_count_clients() {
        let (s, part, slo) = pools("concurrency = 8");
        let (ps, ds) = part.pools(&s);
        let w = ds.workload.expect("a workload");
        let most = |n: u64, m: u64| {
            (1..2048u64)
                .take_while(|&c| {
                    predict_written(
                        &with_clients(&with_replicas(ps, n), w, c),
                        &with_clients(&with_replicas(ds, m), w, c),
                        part.same_group,
                        &FITTED,
                    )
                    .is_some_and(|d| goodput::within_bounds(&d.prediction, &slo, 256.0))
                })
                .last()
                .map_or(0.0, |c| c as f64)
        };
        let f = pool_failure(ps, ds, part.same_group, &slo).expect("a closed loop");
        assert_eq!(f.unit, LoadUnit::Clients);
        assert_eq!(f.offered, 8.0);
        assert_eq!(
            (f.carried, f.prefill_down, f.decode_down),
            (most(3, 2), most(2, 2), most(3, 1))
        );
    }
}
