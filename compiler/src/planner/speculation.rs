//! Speculative decoding in the search: a deployment that declares a draft
//! (`speculative = { … }`) is weighed with and without it on every layout the planner
//! evaluates, and keeps the draft unless turning it off carries more than
//! [`OFF_MARGIN`] more load within the SLOs (goodput). The draft's TPOT speedup falls
//! with the batch (the verify step scores 1 + k tokens per sequence: nearly free while a
//! step reads the weights, up to k + 1 times the GEMM work once it is compute-bound;
//! `perf::step`), so the answer depends on where the load within the SLOs puts the
//! batch. [`judge`] is the one decision: the search's (`dic plan`, `layout = auto`) and
//! W0411's on a written layout (`dic check`), so the planner never deploys what the
//! checker warns about.

use super::goodput::{self, at_rate, Goodput};
use super::Candidate;
use crate::analysis::memory::memory;
use crate::analysis::perf::{predict, FITTED};
use crate::analysis::rules::{Anchor, Finding, SloTarget};
use crate::analysis::{analyze_quick, Analysis, Scenario};
use crate::diagnostics::{Code, Severity};
use serde::{Deserialize, Serialize};

/// Turning a declared draft off must carry this much more goodput: within it the draft
/// the user wrote stays (goodput's bisection resolves 2^-12 of the range, well under it).
pub const OFF_MARGIN: f64 = 0.05;

/// The planner's verdict on a declared draft for one layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeculationChoice {
    /// `eagle3`, `mtp`, `draft_model`, `ngram`, …
    pub method: String,
    pub tokens: u64,
    pub acceptance: f64,
    /// Whether the draft stays on.
    pub on: bool,
    /// Whether each variant meets every SLO at the declared load: (with, without).
    pub meets: (bool, bool),
    /// Goodput with the draft and without it (`None`: that variant misses the SLOs at
    /// the declared load, or even a trickle misses a bound).
    pub with: Option<Goodput>,
    pub without: Option<Goodput>,
    /// Requests in flight per replica with the draft where the comparison is made (the
    /// lower of the two goodputs' rates, else the declared load), and TPOT (ms) there
    /// with and without the draft.
    pub running: f64,
    /// Requests in flight per replica without the draft at that same rate: more than
    /// with it where the draft shortens TPOT (each request stays less long), fewer where
    /// the verify step makes it longer.
    pub running_without: f64,
    pub tpot_with_ms: f64,
    pub tpot_without_ms: f64,
}

impl SpeculationChoice {
    /// Both TPOTs where the two are compared, with the requests each has in flight there
    /// (one request rate: the slower variant holds more, its requests stay longer).
    pub fn tpot_words(&self) -> String {
        format!(
            "at {:.0} in flight per replica TPOT is {:.1} ms with the draft, {:.1} ms without ({:.0} in flight at the same request rate)",
            self.running, self.tpot_with_ms, self.tpot_without_ms, self.running_without
        )
    }

    /// One sentence: which setting and why, with both goodputs.
    pub fn sentence(&self) -> String {
        let rate = |g: &Option<Goodput>| match g {
            Some(g) => format!("{:.2} req/s", g.requests_per_s),
            None => "none".to_string(),
        };
        let batch = self.tpot_words();
        let draft = format!(
            "{} drafting {} tokens at {:.0}% acceptance",
            self.method,
            self.tokens,
            self.acceptance * 100.0
        );
        match (self.on, self.meets) {
            (false, (false, _)) => format!(
                "speculation off: with {draft} the SLOs are missed at the declared load, without it they hold; goodput {} without",
                rate(&self.without)
            ),
            (false, _) => format!(
                "speculation off: {batch} (the verify step of {} tokens per sequence is compute-bound); goodput {} without against {} with",
                self.tokens + 1,
                rate(&self.without),
                rate(&self.with)
            ),
            (true, (true, false)) => format!(
                "speculation on ({draft}): without it the SLOs are missed at the declared load; goodput {} with it",
                rate(&self.with)
            ),
            (true, _) => format!(
                "speculation on ({draft}): {batch}; goodput {} with it against {} without (off needs +{:.0}%)",
                rate(&self.with),
                rate(&self.without),
                OFF_MARGIN * 100.0
            ),
        }
    }
}

/// `s` without its draft.
pub fn without_speculation(s: &Scenario) -> Scenario {
    let mut plain = s.clone();
    plain.engine.speculative = None;
    plain
}

/// The verdict on `s`'s draft (`None` without one): `meets` says whether `s` with the
/// draft and without it meets every SLO at the declared load. Off when only the plain
/// engine meets them, or both do and the plain one carries over [`OFF_MARGIN`] more
/// goodput; on otherwise (a draft the user wrote stays unless dropping it is a real gain).
pub fn judge(
    s: &Scenario,
    slo: &[SloTarget],
    cost_per_hour: f64,
    priced: bool,
    meets: (bool, bool),
) -> Option<SpeculationChoice> {
    let sp = s.engine.speculative.as_ref()?;
    let plain = without_speculation(s);
    let with = meets
        .0
        .then(|| goodput::aggregated(s, slo, cost_per_hour, priced))
        .flatten();
    let without = meets
        .1
        .then(|| goodput::aggregated(&plain, slo, cost_per_hour, priced))
        .flatten();
    let rate = |g: &Option<Goodput>| g.as_ref().map_or(0.0, |g| g.requests_per_s);
    let on = !(meets.1 && (!meets.0 || rate(&without) > rate(&with) * (1.0 + OFF_MARGIN)));
    // Where the two are compared: the lower goodput's rate, which both variants carry
    // (past it one of them queues without end), else the one there is.
    let edge = match (rate(&with), rate(&without)) {
        (a, b) if a > 0.0 && b > 0.0 => a.min(b),
        (a, b) => a.max(b),
    };
    let at = |x: &Scenario| {
        let v = if edge > 0.0 {
            at_rate(x, edge)
        } else {
            x.clone()
        };
        predict(&v, &memory(&v), &FITTED)
    };
    let (p_with, p_without) = (at(s), at(&plain));
    Some(SpeculationChoice {
        method: sp.method.clone(),
        tokens: sp.tokens,
        acceptance: sp.acceptance,
        on,
        meets,
        with,
        without,
        running: p_with.running,
        running_without: p_without.running,
        tpot_with_ms: p_with.tpot * 1e3,
        tpot_without_ms: p_without.tpot * 1e3,
    })
}

/// The search's step: `declared` is a layout evaluated with the deployment's draft;
/// `evaluate_plain` evaluates the same layout on `base` without it. Returns the variant
/// [`judge`] keeps, with the verdict (and its goodput) on it; `declared` unchanged
/// without a draft.
pub(super) fn weigh(
    base: &Scenario,
    slo: &[SloTarget],
    declared: Candidate,
    evaluate_plain: impl Fn(&Scenario) -> Candidate,
) -> Candidate {
    if base.engine.speculative.is_none() {
        return declared;
    }
    let plain_base = without_speculation(base);
    let plain = evaluate_plain(&plain_base);
    let mut s = base.clone();
    s.layout = declared.layout;
    if let Some(e) = &declared.engine {
        e.apply(&mut s);
    }
    crate::analysis::deepep::apply_layout_defaults(&mut s);
    s.model.weights = declared.weights.clone();
    s.model.kv_cache = declared.kv_cache.clone();
    let meets = (declared.meets_slo, plain.meets_slo);
    // Neither meets the SLOs: the layout is rejected as declared (its closeness too).
    if meets == (false, false) {
        return declared;
    }
    let Some(choice) = judge(&s, slo, declared.cost_per_hour, declared.priced, meets) else {
        return declared;
    };
    let mut kept = if choice.on {
        Candidate {
            goodput: choice.with.clone(),
            ..declared
        }
    } else {
        Candidate {
            goodput: choice.without.clone(),
            ..plain
        }
    };
    kept.speculation = Some(choice);
    kept
}

impl Candidate {
    /// Whether the planner turned the deployment's draft off for this layout.
    pub fn speculation_off(&self) -> bool {
        self.speculation.as_ref().is_some_and(|c| !c.on)
    }
}

/// W0411: a written layout that meets its SLOs with its draft would carry over
/// [`OFF_MARGIN`] more goodput without it ([`judge`], as the planner decides).
pub fn speculation_costs_goodput(s: &Scenario, a: &Analysis) -> Option<Finding> {
    s.engine.speculative.as_ref()?;
    let p = a.prediction.as_ref()?;
    // W0405 already says to drop a draft that makes TPOT worse at the declared load.
    if p.overloaded
        || a.slo.iter().any(|r| !r.met)
        || a.findings
            .iter()
            .any(|f| f.severity == Severity::Error || f.code == Code::SpeculationSlower)
    {
        return None;
    }
    let slo: Vec<SloTarget> = a.slo.iter().map(|r| r.target.clone()).collect();
    let plain = without_speculation(s);
    let plain_meets = !analyze_quick(&plain, &slo)
        .findings
        .iter()
        .any(|f| f.severity == Severity::Error);
    let (cost, priced) = match s.topology.price_for_layout(&s.layout) {
        Some(c) => (c, true),
        None => (s.layout.gpus() as f64, false),
    };
    let choice = judge(s, &slo, cost, priced, (true, plain_meets))?;
    if choice.on {
        return None;
    }
    let (with, without) = (choice.with.as_ref()?, choice.without.as_ref()?);
    let within = if slo.is_empty() {
        "saturated (no SLO bounds it)"
    } else {
        "within the SLOs"
    };
    Some(Finding::new(
        Code::SpeculationCostsGoodput,
        Anchor::Engine("speculative"),
        format!(
            "without speculative decoding this layout carries {:.2} req/s {within} against {:.2} req/s with it (+{:.0}%): {}",
            without.requests_per_s,
            with.requests_per_s,
            (without.requests_per_s / with.requests_per_s.max(1e-12) - 1.0) * 100.0,
            choice.tpot_words()
        ),
        "at the load the SLOs allow, the verify step is compute-bound and the draft costs more than it saves",
        Some(format!(
            "remove `speculative` (the planner drops it for `layout = auto` here), or draft fewer tokens (`tokens = {}`)",
            (choice.tokens / 2).max(1)
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{scenario_of_text, search, SearchSpace};

    /// Llama 3.1 8B on one 8 × H100 node at `$24/h` with EAGLE-3, `layout` as given.
    fn eagle3(workload: &str, slo: &str, draft: &str, layout: &str) -> (Scenario, Vec<SloTarget>) {
        scenario_of_text(&format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_h100, price = $24/h }}\n\
workload w {{ {workload} }}\n\
slo s {{ {slo} }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens, speculative = {{ method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", {draft} }} }} }}\n"
        ))
    }

    /// W0411's example: 128-token prompts and outputs under a loose 60 ms TPOT bound.
    fn short_and_loose(layout: &str) -> (Scenario, Vec<SloTarget>) {
        eagle3(
            "prompt = 128 tokens, output = 128 tokens, rate = 2 req/s",
            "ttft.p95 <= 2 s, tpot.p95 <= 60 ms",
            "tokens = 5, acceptance = 20%",
            layout,
        )
    }

    /// The `eagle3_8b` example: 2k prompts, 400 outputs, a 7.5 ms TPOT bound.
    fn interactive(layout: &str) -> (Scenario, Vec<SloTarget>) {
        eagle3(
            "prompt = 2k tokens, output = 400 tokens, concurrency = 4",
            "ttft.p95 <= 300 ms, tpot.p95 <= 7.5 ms",
            "tokens = 3, acceptance = 70%",
            layout,
        )
    }

    fn space(s: &Scenario) -> SearchSpace {
        SearchSpace {
            weights: vec![s.model.weights.clone()],
            kv_cache: vec![s.model.kv_cache.clone()],
        }
    }

    /// By hand: 5 drafts at 20% accepted advance 1 + 0.2 × 5 = 2 tokens per step for a
    /// verify pass of 6 query tokens per sequence. With 128-token contexts the KV reads
    /// are small, so once the 60 ms bound lets the batch grow the step is GEMM-bound and
    /// costs about 6 plain steps' GEMM work for 2 tokens: speculation loses, and the
    /// plain engine carries more within the SLOs. At 7.5 ms and 2k prompts the plain
    /// engine on one GPU misses the bound outright (11.5 ms predicted): the draft stays.
    #[test]
    fn the_draft_is_judged_by_goodput_at_the_batch_the_slos_allow() {
        let (s, slo) = short_and_loose("tp 1");
        let c = judge(&s, &slo, 24.0, true, (true, true)).expect("a draft");
        let (with, without) = (c.with.clone().unwrap(), c.without.clone().unwrap());
        assert!(!c.on, "{}", c.sentence());
        assert!(
            without.requests_per_s > with.requests_per_s * (1.0 + OFF_MARGIN),
            "{}",
            c.sentence()
        );
        // The batch at that load is a large one, where the draft makes TPOT worse.
        assert!(
            c.running >= 64.0 && c.tpot_with_ms > c.tpot_without_ms,
            "{c:?}"
        );
        let words = c.sentence();
        assert!(words.starts_with("speculation off: at "), "{words}");
        assert!(words.contains("compute-bound"), "{words}");
        // The tight bound: only the draft meets it.
        let (s, slo) = interactive("tp 1");
        let plain_meets = !analyze_quick(&without_speculation(&s), &slo)
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error);
        assert!(!plain_meets);
        let c = judge(&s, &slo, 24.0, true, (true, plain_meets)).expect("a draft");
        assert!(c.on && c.without.is_none() && c.with.is_some(), "{c:?}");
        // At the draft's goodput the plain engine's requests stay longer: more in flight.
        assert!(c.running_without > c.running, "{c:?}");
        assert!(
            c.sentence().contains("without it the SLOs are missed"),
            "{}",
            c.sentence()
        );
        // Without a draft there is nothing to judge.
        assert!(judge(&without_speculation(&s), &slo, 24.0, true, (true, true)).is_none());
    }

    /// The search weighs every layout both ways: W0411's case deploys without the draft
    /// (its goodput is the plain engine's), the interactive one keeps it on every layout
    /// where the plain engine misses the TPOT bound.
    #[test]
    fn the_search_keeps_the_better_setting_per_layout() {
        let (s, slo) = short_and_loose("auto");
        let found = search(&s, &slo, &space(&s));
        let chosen = found.chosen.expect("a layout");
        assert!(chosen.speculation_off(), "{:?}", chosen.speculation);
        assert!(chosen.describe().ends_with(", speculation off"));
        let verdict = chosen.speculation.as_ref().unwrap();
        assert_eq!(chosen.goodput, verdict.without);
        // Its figures are the plain engine's.
        let mut plain = without_speculation(&s);
        plain.layout = chosen.layout;
        let p = predict(&plain, &memory(&plain), &FITTED);
        assert!((chosen.tpot_ms.unwrap() - p.tpot * 1e3).abs() < 1e-9);

        let (s, slo) = interactive("auto");
        let found = search(&s, &slo, &space(&s));
        let tp1 = found
            .ranked
            .iter()
            .find(|c| c.layout.tp == 1 && c.layout.pp == 1 && c.layout.dp == 1)
            .expect("tp 1 meets the SLOs with the draft");
        let v = tp1.speculation.as_ref().unwrap();
        assert!(v.on && v.meets == (true, false), "{v:?}");
        assert!(found.ranked.iter().all(|c| !c.speculation_off()));
    }

    /// One answer everywhere: on each layout the search ranks, the checker's W0411 fires
    /// exactly where the search turned the draft off — never on a variant it keeps.
    #[test]
    fn the_checker_warns_exactly_where_the_planner_drops_the_draft() {
        for (some_off, (s, slo)) in [
            (true, short_and_loose("auto")),
            // Close: 4 drafts at 40% on 512-token outputs carry about as much either way.
            (
                false,
                eagle3(
                    "prompt = 128 tokens, output = 512 tokens, rate = 2 req/s",
                    "ttft.p95 <= 2 s, tpot.p95 <= 40 ms",
                    "tokens = 4, acceptance = 40%",
                    "auto",
                ),
            ),
        ] {
            let found = search(&s, &slo, &space(&s));
            assert!(!found.ranked.is_empty());
            // Not vacuous: the first case drops the draft somewhere, the second keeps it.
            assert_eq!(
                found.ranked.iter().take(4).any(|c| c.speculation_off()),
                some_off
            );
            for c in found.ranked.iter().take(4) {
                let mut written = s.clone();
                written.layout = c.layout;
                let a = crate::analysis::analyze(&written, &slo);
                let warned = speculation_costs_goodput(&written, &a);
                assert_eq!(
                    warned.is_some(),
                    c.speculation_off(),
                    "{}: {:?} vs {:?}",
                    c.describe(),
                    warned.map(|f| f.message),
                    c.speculation.as_ref().map(|v| v.sentence())
                );
                if let Some(f) = warned {
                    let v = c.speculation.as_ref().unwrap();
                    let figure = |g: &Option<Goodput>| {
                        format!("{:.2} req/s", g.as_ref().unwrap().requests_per_s)
                    };
                    assert!(f.message.contains(&figure(&v.with)), "{}", f.message);
                    assert!(f.message.contains(&figure(&v.without)), "{}", f.message);
                }
            }
        }
    }
}
