//! Capacity under failure (N−1): whether a deployment's replicas still carry its load
//! within the SLOs with `maxUnavailable` of them down during a rolling update, and after
//! losing the node that holds the most of them (a replica spanning nodes is lost whole
//! with any of its nodes). Both from one replica's goodput (`goodput::aggregated`): the
//! replicas are independent engines behind a load balancer, so `k` of them carry `k` times
//! one replica's load within the SLOs. W0410 when either breaks the SLOs, with the replica
//! count that would hold; the disruption budget and the rollout's `maxUnavailable` /
//! `maxSurge` sized from the same figures.

use super::goodput;
use crate::analysis::rules::{Anchor, Finding, SloTarget};
use crate::analysis::{Analysis, Load, Scenario};
use crate::diagnostics::Code;
use serde::{Deserialize, Serialize};

/// The rolling update dic emits takes one replica down at a time (`maxUnavailable: 1`
/// on the Deployment or LeaderWorkerSet, `targets/src/k8s`).
pub const ROLLOUT_UNAVAILABLE: u64 = 1;

/// A deployment's capacity within the SLOs with replicas gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub replicas: u64,
    /// Requests per second the workload offers.
    pub offered: f64,
    /// Requests per second one replica carries within the SLOs.
    pub per_replica: f64,
    /// Replicas down during a rolling update.
    pub rollout_unavailable: u64,
    /// Requests per second the rest carry within the SLOs during the update.
    pub during_rollout: f64,
    /// Replicas the node holding the most of them takes with it (`None` on a cluster of
    /// one node: losing it loses everything, and no replica count helps).
    pub node_replicas: Option<u64>,
    /// Requests per second the rest carry within the SLOs after that node is lost.
    pub after_node_loss: Option<f64>,
    /// The fewest replicas that hold the SLOs through both.
    pub replicas_needed: u64,
    /// The most replicas that may be down at once with the SLOs held: the
    /// PodDisruptionBudget's `maxUnavailable` (0: no voluntary disruption holds them).
    pub disruption_budget: u64,
    /// One replica more may start before one stops (`maxSurge: 1`): the cluster has the
    /// GPUs of a replica spare beside this deployment.
    pub surge: u64,
}

impl Failure {
    pub fn rollout_holds(&self) -> bool {
        self.during_rollout >= self.offered
    }
    pub fn node_loss_holds(&self) -> bool {
        self.after_node_loss.is_none_or(|c| c >= self.offered)
    }
}

/// Replicas of `replica_gpus` GPUs on the node holding the most of them: as many as a
/// node fits (placed first fit, `analysis::allocation`), at most all of them; one for a
/// replica spanning nodes.
fn replicas_per_node(s: &Scenario, replicas: u64) -> u64 {
    let per_node = s.topology.gpus_per_node.max(1);
    let replica = s.layout.replica_gpus().max(1);
    if replica >= per_node {
        1.min(replicas)
    } else {
        (per_node / replica).clamp(1, replicas.max(1))
    }
}

/// N−1 for an aggregated deployment of independent replicas under an open-loop load;
/// `None` for a closed loop (its clients slow down instead), one whose replicas are DP
/// ranks of one engine (a MoE model's), or one without a workload or latency bound.
pub fn failure(s: &Scenario, slo: &[SloTarget]) -> Option<Failure> {
    let w = s.workload?;
    let Load::Rate(offered) = w.load else {
        return None;
    };
    let replicas = s.layout.dp.max(1);
    if s.model.is_moe() && replicas > 1 {
        return None;
    }
    let mut one = s.clone();
    one.layout.dp = 1;
    let per_replica = goodput::aggregated(&one, slo, 1.0, false)?.requests_per_s;
    if per_replica <= 0.0 {
        return None;
    }
    let many_nodes = s.topology.nodes > 1;
    let node_replicas = many_nodes.then(|| replicas_per_node(s, replicas));
    let carried = |up: u64| up as f64 * per_replica;
    let rollout_unavailable = ROLLOUT_UNAVAILABLE.min(replicas);
    let needed_up = (offered / per_replica).ceil().max(1.0) as u64;
    let node_full = if many_nodes {
        replicas_per_node(s, u64::MAX)
    } else {
        0
    };
    let replicas_needed = needed_up + ROLLOUT_UNAVAILABLE.max(node_full);
    let disruption_budget = replicas.saturating_sub(needed_up).min(replicas - 1);
    let spare = s.topology.total_gpus().saturating_sub(s.layout.gpus());
    Some(Failure {
        replicas,
        offered,
        per_replica,
        rollout_unavailable,
        during_rollout: carried(replicas - rollout_unavailable),
        node_replicas,
        after_node_loss: node_replicas.map(|n| carried(replicas.saturating_sub(n))),
        replicas_needed,
        disruption_budget,
        surge: u64::from(spare >= s.layout.replica_gpus()),
    })
}

/// W0410: a deployment of two or more replicas that, with one down for an update or the
/// fullest node lost, cannot carry the offered load within the SLOs. Says which, by how much, and the replicas
/// that would hold.
pub fn capacity_under_failure(s: &Scenario, a: &Analysis) -> Option<Finding> {
    let p = a.prediction.as_ref()?;
    if p.overloaded || a.slo.iter().any(|r| !r.met) || a.slo.is_empty() {
        return None;
    }
    let slo: Vec<SloTarget> = a.slo.iter().map(|r| r.target.clone()).collect();
    let f = failure(s, &slo)?;
    // One replica has no redundancy to lose: a rollout or a lost node stops it whatever
    // its size (`dic plan` still prints the figures).
    if f.replicas < 2 || (f.rollout_holds() && f.node_loss_holds()) {
        return None;
    }
    let mut broken = Vec::new();
    if !f.rollout_holds() {
        broken.push(format!(
            "with {} replica down for a rolling update the other {} carry {:.2} req/s within the SLOs",
            f.rollout_unavailable,
            f.replicas - f.rollout_unavailable,
            f.during_rollout
        ));
    }
    if let (false, Some(n), Some(left)) = (f.node_loss_holds(), f.node_replicas, f.after_node_loss)
    {
        broken.push(format!(
            "losing the node that holds {n} replica{} leaves {left:.2} req/s",
            if n == 1 { "" } else { "s" }
        ));
    }
    Some(Finding::new(
        Code::CapacityUnderFailure,
        Anchor::Layout,
        format!(
            "the SLOs do not survive a lost replica: {}, against the {:.2} req/s offered (one replica carries {:.2})",
            broken.join("; "),
            f.offered,
            f.per_replica
        ),
        "no headroom for a rollout or a node failure",
        Some(format!(
            "{} replicas hold the SLOs through both (`dp {}`); or accept the risk: with these replicas a disruption budget that keeps the SLOs allows {} down",
            f.replicas_needed, f.replicas_needed, f.disruption_budget
        )),
    ))
}

/// The N−1 figures of the layout `s` runs, from its deployment's one search: the
/// planner's choice's when `s` is that choice (layout and formats), else the written
/// layout's; `None` when the search has none or they count other replicas than `s` runs.
/// `dic plan`, the report and the disruption budget all read them here.
pub fn of_deployed<'a>(search: &'a super::Search, s: &Scenario) -> Option<&'a Failure> {
    let is_choice = search.chosen.as_ref().is_some_and(|c| {
        c.layout == s.layout && c.weights == s.model.weights && c.kv_cache == s.model.kv_cache
    });
    let f = if is_choice {
        search.chosen_failure.as_ref()
    } else {
        search.failure.as_ref()
    }?;
    (f.replicas == s.layout.dp.max(1)).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(nodes: &str, model: &str, rate: f64, layout: &str) -> (Scenario, Vec<SloTarget>) {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.{model}\n\
model m = {model} {{ weights = fp8, kv_cache = fp8 }}\n\
cluster c {{ nodes = {nodes} × dgx_h100, price = $55.04/h }}\n\
workload w {{ prompt = 2k tokens, output = 512 tokens, rate = {rate} req/s }}\n\
slo s {{ ttft.p95 <= 800 ms, tpot.p95 <= 40 ms }}\n\
deploy d {{ model = m, cluster = c, workload = w, slo = s, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        crate::planner::scenario_of_text(&src)
    }

    /// One replica's goodput, from a deployment of one replica.
    fn one_replica(s: &Scenario, slo: &[SloTarget]) -> f64 {
        let mut one = s.clone();
        one.layout.dp = 1;
        goodput::aggregated(&one, slo, 1.0, false)
            .expect("carries load")
            .requests_per_s
    }

    /// prod.dist's shape: Llama 3.1 70B FP8, `tp 2 × dp 8` on two 8-GPU nodes, 20 req/s.
    /// A rollout leaves 7 replicas, a lost node 4 (four per node): 7g and 4g, g one
    /// replica's goodput. It holds both when 4g ≥ 20.
    #[test]
    fn eight_replicas_four_per_node() {
        let (s, slo) = deployment("2", "llama_3_1_70b", 20.0, "tp 2 × dp 8");
        let g = one_replica(&s, &slo);
        let f = failure(&s, &slo).expect("an open loop");
        assert_eq!(
            (f.replicas, f.rollout_unavailable, f.node_replicas),
            (8, 1, Some(4))
        );
        assert!((f.during_rollout - 7.0 * g).abs() < 1e-9, "{f:?}");
        assert_eq!(
            f.after_node_loss.map(|c| (c - 4.0 * g).abs() < 1e-9),
            Some(true)
        );
        assert_eq!(f.rollout_holds(), 7.0 * g >= 20.0);
        assert_eq!(f.node_loss_holds(), 4.0 * g >= 20.0);
        // ceil(20 / g) replicas carry the load; four more survive a node.
        let up = (20.0 / g).ceil() as u64;
        assert_eq!(f.replicas_needed, up + 4);
        assert_eq!(f.disruption_budget, 8 - up);
        // No GPUs spare beside the 16 it takes: no surge.
        assert_eq!(f.surge, 0);
    }

    /// Two replicas of `tp 1` on one of two nodes at a load one replica cannot carry: a
    /// rollout leaves g < the offered rate, the first node takes both: W0410, and
    /// ceil(rate / g) + 8 replicas (a node's worth more) hold through both.
    #[test]
    fn two_replicas_that_do_not_survive_either() {
        let (s, slo) = deployment("2", "llama_3_1_8b", 12.0, "tp 1 × dp 2");
        let g = one_replica(&s, &slo);
        assert!(g < 12.0 && 2.0 * g >= 12.0, "one replica carries {g}");
        let f = failure(&s, &slo).expect("an open loop");
        assert!((f.during_rollout - g).abs() < 1e-9);
        assert_eq!(f.node_replicas, Some(2));
        assert_eq!(f.after_node_loss, Some(0.0));
        assert_eq!(f.replicas_needed, (12.0 / g).ceil() as u64 + 8);
        assert_eq!(f.disruption_budget, 0);
        assert_eq!(f.surge, 1, "14 GPUs spare");
        let a = crate::analysis::analyze(&s, &slo);
        let w = capacity_under_failure(&s, &a).expect("W0410");
        assert_eq!(w.code, Code::CapacityUnderFailure);
        assert!(
            w.message.contains("rolling update") && w.message.contains("losing the node"),
            "{}",
            w.message
        );
        // At half the load one replica carries it: a rollout holds, the node still not.
        let (s, slo) = deployment("2", "llama_3_1_8b", 0.5 * g, "tp 1 × dp 2");
        let f = failure(&s, &slo).expect("an open loop");
        assert!(f.rollout_holds() && !f.node_loss_holds());
        assert_eq!(f.disruption_budget, 1);
    }
}
