//! Capacity under failure (N−1): whether a deployment's replicas still carry its load
//! within the SLOs with `maxUnavailable` of them down during a rolling update, and after
//! losing the node that holds the most of them (a replica spanning nodes is lost whole
//! with any of its nodes). Both from one replica's capacity within the SLOs: under an
//! open loop (`rate`) its goodput (`goodput::aggregated`), under a closed loop
//! (`concurrency`) the most clients it holds with every latency bound met (the perf model
//! at that many in flight: the same clients spread over fewer replicas raise each one's
//! batch and queue). The replicas are independent engines behind a load balancer, so `k`
//! of them carry `k` times one replica's load — except a MoE model's DP ranks, which vLLM
//! runs as one engine (`--data-parallel-size`): a rollout or any node of it stops every
//! rank, so the unit lost is the whole engine. W0410 when either event breaks the SLOs,
//! with the replica count that would hold; the disruption budget and the rollout's
//! `maxUnavailable` / `maxSurge` sized from the same figures; the planner's ranking
//! prefers, at near-equal cost, a layout that survives both ([`prefer_surviving`]).

use super::{goodput, Candidate};
use crate::analysis::memory::memory;
use crate::analysis::perf::{predict, FITTED};
use crate::analysis::rules::{Anchor, Finding, SloTarget};
use crate::analysis::{Analysis, Load, Scenario, WorkloadSpec};
use crate::diagnostics::Code;
use serde::{Deserialize, Serialize};

/// The rolling update dic emits takes one replica down at a time (`maxUnavailable: 1`
/// on the Deployment or LeaderWorkerSet, `targets/src/k8s`).
pub const ROLLOUT_UNAVAILABLE: u64 = 1;

/// Costs within this share above the cheapest layout's count as the same price for the
/// planner's N−1 preference ([`prefer_surviving`]): a layout that survives a lost replica
/// and a lost node is worth that much more per hour.
pub const NEAR_EQUAL_COST: f64 = 0.05;

/// The most clients [`most_clients`] tries on one replica (a bound, not a prediction:
/// a deployment with no latency bound holds any number, each only slower).
const MOST_CLIENTS: u64 = 1 << 20;

/// The most clients [`clients_before_break`] scans.
const MOST_SCANNED: u64 = 1 << 12;

/// What a deployment's load and capacity figures count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadUnit {
    /// An open loop (`rate`): requests per second.
    #[default]
    RequestsPerSecond,
    /// A closed loop (`concurrency`): clients, each with one request in flight.
    Clients,
}

impl LoadUnit {
    pub fn is_rate(&self) -> bool {
        *self == LoadUnit::RequestsPerSecond
    }
    /// A figure in this unit as printed: `12.50 req/s`, `96 clients`.
    pub fn show(self, v: f64) -> String {
        match self {
            LoadUnit::RequestsPerSecond => format!("{v:.2} req/s"),
            LoadUnit::Clients => format!("{v:.0} clients"),
        }
    }
}

/// A deployment's capacity within the SLOs with replicas gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Units a rollout or a node takes down: replicas, or 1 for a MoE engine (`one_engine`).
    pub replicas: u64,
    /// The load the workload offers: requests per second, or clients (`unit`).
    pub offered: f64,
    /// The load one replica (or the engine) carries within the SLOs, in `unit`.
    pub per_replica: f64,
    /// Replicas down during a rolling update.
    pub rollout_unavailable: u64,
    /// The load the rest carry within the SLOs during the update, in `unit`.
    pub during_rollout: f64,
    /// Replicas the node holding the most of them takes with it (`None` on a cluster of
    /// one node: losing it loses everything, and no replica count helps).
    pub node_replicas: Option<u64>,
    /// The load the rest carry within the SLOs after that node is lost, in `unit`.
    pub after_node_loss: Option<f64>,
    /// The fewest replicas (engines, for `one_engine`) that hold the SLOs through both.
    pub replicas_needed: u64,
    /// The most replicas that may be down at once with the SLOs held: the
    /// PodDisruptionBudget's `maxUnavailable` (0: no voluntary disruption holds them).
    pub disruption_budget: u64,
    /// One replica more may start before one stops (`maxSurge: 1`): the cluster has the
    /// GPUs of a replica spare beside this deployment.
    pub surge: u64,
    /// What `offered`, `per_replica`, `during_rollout` and `after_node_loss` count
    /// (written only for a closed loop: an open loop's JSON is as it was).
    #[serde(default, skip_serializing_if = "LoadUnit::is_rate")]
    pub unit: LoadUnit,
    /// The layout's DP ranks are one vLLM engine (a MoE model's `--data-parallel-size`,
    /// `analysis::deployable::launch_shape`): vLLM's DP ranks step in lockstep and cannot
    /// run short of one, so a rollout or any of its nodes stops all of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_engine: bool,
}

impl Failure {
    pub fn rollout_holds(&self) -> bool {
        self.during_rollout >= self.offered
    }
    pub fn node_loss_holds(&self) -> bool {
        self.after_node_loss.is_none_or(|c| c >= self.offered)
    }
    /// The SLOs hold through both events.
    pub fn survives(&self) -> bool {
        self.rollout_holds() && self.node_loss_holds()
    }
}

/// Units of `unit_gpus` GPUs on the node holding the most of them: as many as a node
/// fits (placed first fit, `analysis::allocation`), at most all `units`; one for a unit
/// spanning nodes.
fn units_per_node(s: &Scenario, unit_gpus: u64, units: u64) -> u64 {
    let per_node = s.topology.gpus_per_node.max(1);
    let unit = unit_gpus.max(1);
    if unit >= per_node {
        1.min(units)
    } else {
        (per_node / unit).clamp(1, units.max(1))
    }
}

/// The unit a rollout or a lost node takes down, and how many the deployment runs: one
/// replica of `dp 1` each, or a MoE model's whole engine of `dp` ranks once.
fn unit_of(s: &Scenario) -> (Scenario, u64, bool) {
    let (units, one_engine) = units_of(s);
    let mut unit = s.clone();
    if !one_engine {
        unit.layout.dp = 1;
    }
    (unit, units, one_engine)
}

/// How many units `s` runs and whether its unit is one MoE engine ([`unit_of`], without
/// building the unit's scenario).
fn units_of(s: &Scenario) -> (u64, bool) {
    if s.model.is_moe() && s.layout.dp > 1 {
        (1, true)
    } else {
        (s.layout.dp.max(1), false)
    }
}

/// Whether `s` can survive a rollout at all: a deployment whose every unit a rollout
/// takes down ([`ROLLOUT_UNAVAILABLE`] of them) carries nothing during it, so with any
/// load offered it cannot, whatever one unit carries. Decided from the layout alone, so
/// [`prefer_surviving`] skips the unit's goodput search for it.
fn may_survive(s: &Scenario) -> bool {
    let (units, _) = units_of(s);
    let offered = s.workload.is_some_and(|w| match w.load {
        Load::Rate(rate) => rate > 0.0,
        Load::Concurrency(n) => n > 0,
    });
    !offered || units > ROLLOUT_UNAVAILABLE.min(units)
}

/// `s` under a steady closed loop of `clients` (same prompt and output).
pub(crate) fn with_clients(s: &Scenario, w: WorkloadSpec, clients: u64) -> Scenario {
    let mut v = s.clone();
    v.workload = Some(WorkloadSpec {
        load: Load::Concurrency(clients.max(1)),
        requests: None,
        ..w
    });
    v
}

/// The most clients of a closed loop that `unit` (one replica or engine) holds with
/// every latency bound met: the perf model at that many in flight ([`most_clients_by`]:
/// one replica's closed loop only lengthens its step and queues with more clients; a
/// test checks the figure against a scan). `None` without a workload or a latency bound,
/// or when one client already misses.
pub fn most_clients(unit: &Scenario, slo: &[SloTarget]) -> Option<u64> {
    let w = unit.workload?;
    if goodput::latency_bounds(slo).is_empty() {
        return None;
    }
    let mem = memory(unit);
    let output = w.output.max(1.0);
    most_clients_by(|c| {
        goodput::within_bounds(
            &predict(&with_clients(unit, w, c), &mem, &FITTED),
            slo,
            output,
        )
    })
}

/// The most clients at which `holds`, taken as monotone (true up to a count, false
/// past it): doubling, then bisection of the last doubling; at most [`MOST_CLIENTS`].
/// `None` when one client already fails.
pub(crate) fn most_clients_by(holds: impl Fn(u64) -> bool) -> Option<u64> {
    if !holds(1) {
        return None;
    }
    let (mut lo, mut hi) = (1, 2);
    while hi <= MOST_CLIENTS && holds(hi) {
        lo = hi;
        hi *= 2;
    }
    if hi > MOST_CLIENTS {
        return Some(lo);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// One less than the fewest clients at which `holds` fails, by a scan from one client
/// (for a prediction not monotone in clients: the pools' closed loop near the prefill
/// pool's saturation holds again past a first break, and the figure must be one no load
/// below it breaks); at most [`MOST_SCANNED`]. `None` when one client already fails.
pub(crate) fn clients_before_break(holds: impl Fn(u64) -> bool) -> Option<u64> {
    match (1..=MOST_SCANNED).find(|&c| !holds(c)) {
        Some(1) => None,
        Some(c) => Some(c - 1),
        None => Some(MOST_SCANNED),
    }
}

/// N−1 for an aggregated deployment: its replicas (or its MoE engine) under an open loop
/// (req/s) or a closed loop (clients); `None` without a workload, or when one replica
/// carries nothing within the SLOs.
pub fn failure(s: &Scenario, slo: &[SloTarget]) -> Option<Failure> {
    let w = s.workload?;
    let (unit_scenario, replicas, one_engine) = unit_of(s);
    let (offered, unit, per_replica) = match w.load {
        Load::Rate(rate) => (
            rate,
            LoadUnit::RequestsPerSecond,
            goodput::aggregated(&unit_scenario, slo, 1.0, false)?.requests_per_s,
        ),
        Load::Concurrency(n) => (
            n as f64,
            LoadUnit::Clients,
            most_clients(&unit_scenario, slo)? as f64,
        ),
    };
    if per_replica <= 0.0 {
        return None;
    }
    let unit_gpus = unit_scenario.layout.gpus();
    let many_nodes = s.topology.nodes > 1;
    let node_replicas = many_nodes.then(|| units_per_node(s, unit_gpus, replicas));
    let carried = |up: u64| up as f64 * per_replica;
    let rollout_unavailable = ROLLOUT_UNAVAILABLE.min(replicas);
    // A closed loop's clients split over the replicas up, the fullest taking the
    // rounded-up share: `k` replicas hold `k × per_replica` clients exactly.
    let needed_up = (offered / per_replica).ceil().max(1.0) as u64;
    let node_full = if many_nodes {
        units_per_node(s, unit_gpus, u64::MAX)
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
        surge: u64::from(spare >= unit_gpus),
        unit,
        one_engine,
    })
}

/// Whether W0410 speaks for `s`: two or more replicas, or a MoE engine whose DP ranks
/// span nodes (one node lost stops the ranks on every other: the user wrote `dp` ≥ 2 but
/// has one engine). One replica (or one engine inside a node) has no redundancy to lose:
/// a rollout or a lost node stops it whatever its size (`dic plan` still prints the figures).
fn redundancy_expected(s: &Scenario, f: &Failure) -> bool {
    if f.one_engine {
        return s.layout.dp > 1 && s.topology.nodes_for_layout(&s.layout) > 1;
    }
    f.replicas >= 2
}

/// `, 24 GPUs: more than the cluster's 16` when the replicas that hold need more GPUs than
/// the cluster has (W0410's help then asks for a larger cluster too).
pub(crate) fn beyond_cluster(gpus: u64, cluster: u64) -> String {
    if gpus > cluster {
        format!(", {gpus} GPUs: more than the cluster's {cluster}")
    } else {
        String::new()
    }
}

/// What each broken event leaves, in words (W0410's message).
fn broken_events(s: &Scenario, f: &Failure) -> Vec<String> {
    let u = f.unit;
    let mut broken = Vec::new();
    if f.one_engine {
        broken.push(format!(
            "its {} DP ranks over {} nodes run as one vLLM engine (`--data-parallel-size`), which stops whole when any node is lost or for a rolling update, leaving {}",
            s.layout.dp,
            s.topology.nodes_for_layout(&s.layout),
            u.show(0.0)
        ));
        return broken;
    }
    let each = |up: u64| {
        if u == LoadUnit::Clients && up > 0 {
            format!(
                " ({} clients each, one holds {})",
                (f.offered / up as f64).ceil(),
                u.show(f.per_replica)
            )
        } else {
            String::new()
        }
    };
    if !f.rollout_holds() {
        let up = f.replicas - f.rollout_unavailable;
        broken.push(format!(
            "with {} replica down for a rolling update the other {up} {} {} within the SLOs{}",
            f.rollout_unavailable,
            if u == LoadUnit::Clients {
                "hold"
            } else {
                "carry"
            },
            u.show(f.during_rollout),
            each(up)
        ));
    }
    if let (false, Some(n), Some(left)) = (f.node_loss_holds(), f.node_replicas, f.after_node_loss)
    {
        broken.push(format!(
            "losing the node that holds {n} replica{} leaves {}{}",
            if n == 1 { "" } else { "s" },
            u.show(left),
            each(f.replicas.saturating_sub(n))
        ));
    }
    broken
}

/// W0410: a deployment of two or more replicas (or a MoE engine over several nodes)
/// that, with one down for an update or the fullest node lost, cannot carry the offered
/// load within the SLOs. Says which, by how much, and the replicas that would hold.
pub fn capacity_under_failure(s: &Scenario, a: &Analysis) -> Option<Finding> {
    let p = a.prediction.as_ref()?;
    if p.overloaded || a.slo.iter().any(|r| !r.met) || a.slo.is_empty() {
        return None;
    }
    let slo: Vec<SloTarget> = a.slo.iter().map(|r| r.target.clone()).collect();
    let f = failure(s, &slo)?;
    if !redundancy_expected(s, &f) || f.survives() {
        return None;
    }
    let u = f.unit;
    let carries = if u == LoadUnit::Clients {
        "holds"
    } else {
        "carries"
    };
    let help = if f.one_engine {
        format!(
            "{} engines of `{}` (a deployment each) hold the SLOs through both; or accept the risk: the one engine allows no voluntary disruption",
            f.replicas_needed, s.layout
        )
    } else {
        format!(
            "{} replicas hold the SLOs through both (`dp {}`{}); or accept the risk: with these replicas a disruption budget that keeps the SLOs allows {} down",
            f.replicas_needed,
            f.replicas_needed,
            beyond_cluster(
                f.replicas_needed * s.layout.replica_gpus(),
                s.topology.total_gpus()
            ),
            f.disruption_budget
        )
    };
    Some(Finding::new(
        Code::CapacityUnderFailure,
        Anchor::Layout,
        format!(
            "the SLOs do not survive a lost replica: {}, against the {} offered (one {} {carries} {})",
            broken_events(s, &f).join("; "),
            u.show(f.offered),
            if f.one_engine { "engine" } else { "replica" },
            u.show(f.per_replica)
        ),
        "no headroom for a rollout or a node failure",
        Some(help),
    ))
}

/// The ranked candidates' N−1, the planner's preference: among those within
/// [`NEAR_EQUAL_COST`] of the first's $/h, the first that survives a replica down and the
/// fullest node lost moves to the front (it keeps its place among the rest). Returns the
/// cheapest ranked candidate that survives when the first (after the move) does not — the
/// alternative `dic plan` names beside W0410 — else `None`. `scenario_of` gives a
/// candidate's scenario. Candidates are checked in rank order until one survives, so a
/// search whose first survives costs one N−1. Where the first serves the declared load
/// (`Candidate::serves`: its clients admitted where no bound limits TTFT), only a survivor
/// that serves it too counts: a cheaper layout whose clients wait for a slot is not moved
/// ahead of one that admits them.
pub fn prefer_surviving(
    ranked: &mut [Candidate],
    slo: &[SloTarget],
    scenario_of: impl Fn(&Candidate) -> Scenario,
) -> Option<Candidate> {
    let first_cost = ranked.first()?.cost_per_hour;
    let serving = ranked.first()?.serves(slo);
    let survivor = ranked.iter().position(|c| {
        if serving && !c.serves(slo) {
            return false;
        }
        let s = scenario_of(c);
        may_survive(&s) && failure(&s, slo).is_some_and(|f| f.survives())
    })?;
    if survivor == 0 {
        return None;
    }
    if ranked[survivor].cost_per_hour <= first_cost * (1.0 + NEAR_EQUAL_COST) {
        ranked[..=survivor].rotate_right(1);
        return None;
    }
    Some(ranked[survivor].clone())
}

/// The N−1 figures of the layout `s` runs, from its deployment's one search: the
/// planner's choice's when `s` is that choice (layout and formats), else the written
/// layout's; `None` when the search has none or they count other replicas (or engines)
/// than `s` runs.
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
    let (_, units, one_engine) = unit_of(s);
    (f.replicas == units && f.one_engine == one_engine).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(nodes: &str, model: &str, rate: f64, layout: &str) -> (Scenario, Vec<SloTarget>) {
        deployment_under(nodes, model, &format!("rate = {rate} req/s"), layout)
    }

    /// `load`: `rate = … req/s` or `concurrency = …`.
    fn deployment_under(
        nodes: &str,
        model: &str,
        load: &str,
        layout: &str,
    ) -> (Scenario, Vec<SloTarget>) {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.{model}\n\
model m = {model} {{ weights = fp8, kv_cache = fp8 }}\n\
cluster c {{ nodes = {nodes} × dgx_h100, price = $55.04/h }}\n\
workload w {{ prompt = 2k tokens, output = 512 tokens, {load} }}\n\
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
        assert!(
            may_survive(&s),
            "eight replicas may survive; the figures decide"
        );
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

    /// Whether `s` (its layout, its load) meets every bound, from the perf model and the
    /// bounds as written.
    fn meets(s: &Scenario, slo: &[SloTarget]) -> bool {
        let p = predict(s, &memory(s), &FITTED);
        let output = s.workload.expect("a workload").output;
        !p.overloaded
            && slo
                .iter()
                .all(|t| crate::analysis::rules::predicted(&p, t, output) <= t.value)
    }

    fn at(s: &Scenario, dp: u64, clients: u64) -> Scenario {
        let mut v = s.clone();
        v.layout.dp = dp;
        let w = v.workload.expect("a workload");
        v.workload = Some(WorkloadSpec {
            load: Load::Concurrency(clients),
            ..w
        });
        v
    }

    /// A closed loop of N clients over 4 replicas of Llama 3.1 8B on one node: c, the most
    /// clients one replica holds within the bounds, by a scan of the perf model; at
    /// N = 3c + 3 the four hold (N/4 ≤ c), a rollout leaves 3 replicas with c + 1 clients
    /// each: W0410, and ceil(N / c) + 1 = 5 replicas hold. At N = 3c the rollout holds.
    #[test]
    fn a_closed_loop_over_fewer_replicas() {
        let (s, slo) = deployment_under("1", "llama_3_1_8b", "concurrency = 8", "tp 1 × dp 4");
        let c = (1..4096)
            .take_while(|&n| meets(&at(&s, 1, n), &slo))
            .last()
            .expect("one client holds");
        assert!(c >= 3, "one replica holds {c}");
        let n = 3 * c + 3;
        let (s, slo) = deployment_under(
            "1",
            "llama_3_1_8b",
            &format!("concurrency = {n}"),
            "tp 1 × dp 4",
        );
        assert!(meets(&s, &slo), "four replicas hold {n} clients");
        // The perf model at the rollout's concurrency: n / 3 = c + 1 clients per replica.
        assert!(!meets(&at(&s, 3, n), &slo));
        let f = failure(&s, &slo).expect("a closed loop is checked");
        assert_eq!(f.unit, LoadUnit::Clients);
        assert_eq!((f.offered, f.per_replica), (n as f64, c as f64));
        assert_eq!(f.during_rollout, 3.0 * c as f64);
        assert!(!f.rollout_holds() && f.node_loss_holds());
        assert_eq!(f.node_replicas, None, "one node");
        assert_eq!(f.replicas_needed, 5);
        assert_eq!(f.disruption_budget, 0);
        let a = crate::analysis::analyze(&s, &slo);
        let w = capacity_under_failure(&s, &a).expect("W0410");
        assert!(
            w.message.contains(&format!("{} clients each", c + 1))
                && w.message.contains(&format!("{n} clients offered")),
            "{}",
            w.message
        );
        assert!(w.help.as_deref().is_some_and(|h| h.contains("`dp 5`")));
        // 3c clients: three replicas hold c each.
        let (s, slo) = deployment_under(
            "1",
            "llama_3_1_8b",
            &format!("concurrency = {}", 3 * c),
            "tp 1 × dp 4",
        );
        assert!(meets(&at(&s, 3, 3 * c), &slo));
        let f = failure(&s, &slo).expect("a closed loop is checked");
        assert!(f.survives(), "{f:?}");
        assert_eq!(f.disruption_budget, 1);
    }

    /// Qwen3 235B-A22B `tp 8 × dp 2 × ep` over two 8-GPU nodes: one vLLM engine of 16
    /// GPUs whose two DP ranks step together. A rollout or either node stops it: 0 left of
    /// the engine's goodput G; at half of G, ceil(0.5) + 1 = 2 engines hold. W0410 names
    /// the engine. The same engine inside one node (`tp 2 × dp 4`) is not warned (one
    /// engine, one node: no redundancy was written).
    #[test]
    fn a_moe_engine_over_two_nodes_is_lost_whole() {
        let layout = "tp 8 × dp 2 × ep";
        let (s, slo) = deployment("2", "qwen3_235b_a22b", 1.0, layout);
        let g = goodput::aggregated(&s, &slo, 1.0, false)
            .expect("the engine carries load")
            .requests_per_s;
        let (s, slo) = deployment("2", "qwen3_235b_a22b", 0.5 * g, layout);
        let f = failure(&s, &slo).expect("a MoE engine is checked");
        assert!(f.one_engine);
        assert_eq!((f.replicas, f.rollout_unavailable), (1, 1));
        assert!(
            (f.per_replica - g).abs() < 1e-9 * g,
            "{} vs {g}",
            f.per_replica
        );
        assert_eq!(f.during_rollout, 0.0);
        // What `prefer_surviving` decides from the layout alone, without the search.
        assert!(!f.survives() && !may_survive(&s));
        assert_eq!((f.node_replicas, f.after_node_loss), (Some(1), Some(0.0)));
        assert_eq!(f.replicas_needed, 2);
        assert_eq!(f.disruption_budget, 0);
        // The engine deployed is the one the figures count: the report and the disruption
        // budget read them (one unit of `dp 2`, not two replicas).
        let mut search = crate::planner::Search::empty();
        search.failure = Some(f.clone());
        assert_eq!(of_deployed(&search, &s), Some(&f));
        let a = crate::analysis::analyze(&s, &slo);
        assert!(a.slo.iter().all(|r| r.met), "{:?}", a.slo);
        let w = capacity_under_failure(&s, &a).expect("W0410");
        assert!(
            w.message
                .contains("2 DP ranks over 2 nodes run as one vLLM engine"),
            "{}",
            w.message
        );
        assert!(w
            .help
            .as_deref()
            .is_some_and(|h| h.starts_with("2 engines of")));
        let (s, slo) = deployment("2", "qwen3_235b_a22b", 0.5 * g, "tp 2 × dp 4 × ep");
        let f = failure(&s, &slo).expect("a MoE engine is checked");
        assert!(f.one_engine && f.replicas == 1);
        let a = crate::analysis::analyze(&s, &slo);
        assert!(capacity_under_failure(&s, &a).is_none());
    }

    fn candidate(layout: &str, cost_per_hour: f64) -> Candidate {
        let layout: crate::program::Layout = match layout {
            "tp 1" => crate::program::Layout::default(),
            _ => crate::program::Layout {
                dp: layout.trim_start_matches("tp 1 × dp ").parse().expect("dp"),
                ..crate::program::Layout::default()
            },
        };
        Candidate {
            layout,
            weights: "fp8".into(),
            kv_cache: "fp8".into(),
            gpus: layout.gpus(),
            nodes: 1,
            cost_per_hour,
            priced: true,
            cost_per_million_output: None,
            ttft_ms: None,
            tpot_ms: None,
            output_tokens_per_s: None,
            meets_slo: true,
            rejected_because: None,
            rejected_code: None,
            max_output_tokens_per_s: None,
            overloaded: false,
            running: None,
            clients_wait: false,
            shortfall: None,
            engine: None,
            goodput: None,
            speculation: None,
        }
    }

    /// Llama 3.1 8B at half of one replica's goodput on one node: `tp 1` (one replica,
    /// lost whole in a rollout) ranks first, `tp 1 × dp 2` survives (g ≥ the load). Within
    /// 5% of its price the survivor moves to the front; at 25% more it stays second and is
    /// named as the cheapest that survives.
    #[test]
    fn the_ranking_prefers_a_survivor_at_near_equal_cost() {
        let (s, slo) = deployment("1", "llama_3_1_8b", 1.0, "tp 1");
        let g = one_replica(&s, &slo);
        let (s, slo) = deployment("1", "llama_3_1_8b", 0.5 * g, "tp 1");
        let scenario_of = |c: &Candidate| {
            let mut v = s.clone();
            v.layout = c.layout;
            v
        };
        let mut ranked = vec![candidate("tp 1", 10.0), candidate("tp 1 × dp 2", 10.4)];
        assert!(prefer_surviving(&mut ranked, &slo, scenario_of).is_none());
        assert_eq!(ranked[0].layout.dp, 2, "the survivor first");
        let mut ranked = vec![candidate("tp 1", 10.0), candidate("tp 1 × dp 2", 12.5)];
        let survivor = prefer_surviving(&mut ranked, &slo, scenario_of).expect("one survives");
        assert_eq!((ranked[0].layout.dp, survivor.layout.dp), (1, 2));
        // Nothing survives: nothing moves, nothing is named.
        let mut ranked = vec![candidate("tp 1", 10.0)];
        assert!(prefer_surviving(&mut ranked, &slo, scenario_of).is_none());
    }
}
