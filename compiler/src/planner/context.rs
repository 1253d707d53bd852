//! The context knob: when no layout meets the SLOs at the deployment's `max_model_len`
//! (by default the model's whole context, 128k tokens for most), the planner searches
//! `max_model_len` too — down to what the workload's requests need (prompt + output) —
//! and finds the longest context at which some layout meets every SLO. vLLM sizes its
//! KV cache so one request of `max_model_len` fits (vllm/v1/core/kv_cache_utils.py:
//! `check_enough_kv_cache_memory`), so a 131,072-token context alone can keep an 8B model
//! off a 24 GB GPU that serves 4k-token requests well.
//!
//! A wrapper around [`super::search`]: it never changes what the search chose. E0701 says
//! what it found (the deployment's engine setting stays the user's), `dic plan` prints it,
//! and `dic init` writes it into the file it generates.

use super::{search, Candidate, Search, SearchSpace};
use crate::analysis::rules::SloTarget;
use crate::analysis::Scenario;
use serde::Serialize;

/// A shorter context at which the search finds a layout that meets every SLO, or where
/// none does at any context, one at which a layout at least fits (and what it misses).
#[derive(Debug, Clone, Serialize)]
pub struct ContextFit {
    /// The deployment's `max_model_len` (the model's context unless written).
    pub from: u64,
    /// The longest context tried at which a layout meets every SLO (else fits).
    pub max_model_len: u64,
    /// What the workload's requests need: prompt + output tokens.
    pub needed: u64,
    /// The search's choice at that context, when one meets every SLO there.
    pub chosen: Option<Candidate>,
    /// Else the closest layout there (it fits; it misses an SLO or the load).
    pub closest: Option<Candidate>,
}

/// The search, and when it chose nothing and no layout even fits, the longest shorter
/// context that lets it choose (or at least fit one) in [`Search::context`]. Contexts
/// tried: the workload's need, then powers of two up to the deployment's
/// `max_model_len`, by bisection (a shorter context never fits less, so fitting and
/// meeting the SLOs are monotone in it): at most 2 × (1 + log2(max ÷ need)) extra
/// searches, none when the first search chose a layout or the workload already needs the
/// whole context.
pub fn search_fitting_context(base: &Scenario, slo: &[SloTarget], space: &SearchSpace) -> Search {
    search_fitting_context_to(base, slo, space, super::Extent::Whole)
}

/// [`search_fitting_context`] to `extent` (the what-if's searches read the aggregated
/// choice alone).
pub fn search_fitting_context_to(
    base: &Scenario,
    slo: &[SloTarget],
    space: &SearchSpace,
    extent: super::Extent,
) -> Search {
    let mut found = super::search_with(base, slo, space, extent);
    if found.chosen.is_none() {
        found.context = fit_context(base, slo, space, found.closest.is_some());
    }
    found
}

/// The longest context below the deployment's at which a layout meets every SLO, else
/// (when `fits_already` is false: no layout fits the deployment's context at all) the
/// longest at which one fits. `None` without a workload, when requests already need the
/// whole context, or when nothing fits even the workload's own need.
pub fn fit_context(
    base: &Scenario,
    slo: &[SloTarget],
    space: &SearchSpace,
    fits_already: bool,
) -> Option<ContextFit> {
    let w = base.workload.as_ref()?;
    let needed = (w.prompt + w.output).ceil().max(1.0) as u64;
    let from = base.engine.max_model_len;
    let lengths = context_lengths(needed, from);
    let at = |len: u64| {
        let mut s = base.clone();
        s.engine.max_model_len = len;
        let found = search(&s, slo, space);
        (found.chosen, found.closest)
    };
    let fit = |len: u64, chosen: Option<Candidate>, closest: Option<Candidate>| ContextFit {
        from,
        max_model_len: len,
        needed,
        chosen,
        closest,
    };
    let meets = |(chosen, _): &(Option<Candidate>, Option<Candidate>)| chosen.is_some();
    let fits = |(chosen, closest): &(Option<Candidate>, Option<Candidate>)| {
        chosen.is_some() || closest.is_some()
    };
    // The shortest first: if nothing meets (or fits) there, nothing longer does.
    let shortest = at(*lengths.first()?);
    if meets(&shortest) {
        let (len, (chosen, closest)) = longest(&lengths, shortest, at, meets);
        return Some(fit(len, chosen, closest));
    }
    if fits_already || !fits(&shortest) {
        return None;
    }
    let (len, (chosen, closest)) = longest(&lengths, shortest, at, fits);
    Some(fit(len, chosen, closest))
}

type Found = (Option<Candidate>, Option<Candidate>);

/// By bisection, the longest of `lengths` whose search passes `ok`, given that the first
/// (`shortest`, already searched) does.
fn longest(
    lengths: &[u64],
    shortest: Found,
    at: impl Fn(u64) -> Found,
    ok: impl Fn(&Found) -> bool,
) -> (u64, Found) {
    let mut best = (lengths[0], shortest);
    let (mut lo, mut hi) = (0, lengths.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let found = at(lengths[mid]);
        if ok(&found) {
            best = (lengths[mid], found);
            lo = mid;
        } else {
            hi = mid;
        }
    }
    best
}

/// The contexts to try, ascending: the workload's need, then every power of two above it
/// and below the deployment's `max_model_len`. Empty when the need is not below it.
fn context_lengths(needed: u64, from: u64) -> Vec<u64> {
    if needed >= from {
        return Vec::new();
    }
    let mut out = vec![needed];
    let mut p = needed.next_power_of_two();
    if p == needed {
        p *= 2;
    }
    while p < from {
        out.push(p);
        p *= 2;
    }
    out
}

/// `131072` → `131,072`: context lengths as people read them.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl ContextFit {
    /// One sentence: what the planner would lower and what then meets the SLOs (or fits).
    pub fn sentence(&self) -> String {
        let lowered = format!(
            "with `max_model_len` lowered from {} to {} (the workload's requests need {})",
            thousands(self.from),
            thousands(self.max_model_len),
            thousands(self.needed)
        );
        match (&self.chosen, &self.closest) {
            (Some(c), _) => format!(
                "{lowered}, `{}` meets every SLO on {} GPU{}",
                c.describe(),
                c.gpus,
                if c.gpus == 1 { "" } else { "s" }
            ),
            (None, Some(c)) => format!(
                "{lowered}, `{}` fits but misses: {}",
                c.describe(),
                c.rejected_because
                    .as_deref()
                    .map(|r| r.split_once(": ").map_or(r, |x| x.1))
                    .unwrap_or("?")
            ),
            (None, None) => format!("{lowered}, a layout fits"),
        }
    }

    /// What to write in the deployment.
    pub fn setting(&self) -> String {
        format!(
            "engine = vllm {{ max_model_len = {} tokens }}",
            self.max_model_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_run_from_the_need_to_below_the_deployments() {
        assert_eq!(
            context_lengths(2560, 131_072),
            vec![2560, 4096, 8192, 16384, 32768, 65536]
        );
        assert_eq!(context_lengths(4096, 16384), vec![4096, 8192]);
        assert!(context_lengths(8192, 8192).is_empty());
        assert_eq!(thousands(131_072), "131,072");
        assert_eq!(thousands(512), "512");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    /// Llama 3.1 8B on one RTX 4090: its 131,072-token context does not fit beside the
    /// 16 GB of weights; a shorter one does, and the search then chooses `tp 1`.
    #[test]
    fn an_8b_model_on_one_4090_fits_a_shorter_context() {
        let src = "import std.gpus.rtx_4090\nimport std.models.llama_3_1_8b\n\
node n { gpus = 1 × rtx_4090 }\n\
cluster c { nodes = 1 × n }\n\
workload w { prompt = 2k tokens, output = 512 tokens, rate = 1 req/s }\n\
slo s { ttft.p95 <= 2 s, tpot.p95 <= 100 ms }\n\
deploy d { model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = auto }\n";
        let world = crate::source::MemoryWorld::new().with("p.dist", src);
        let mut session = crate::resolve::Session::new(&world);
        session.load_root("p.dist").expect("readable");
        let front = crate::front::check_session(session);
        let ds = crate::analysis::scenarios_from_program(&front.program).remove(0);
        let space = super::super::space_of(&ds);
        let found = search_fitting_context(&ds.scenario, &ds.slo, &space);
        assert!(found.chosen.is_none(), "the full context does not fit");
        let fit = found.context.expect("a shorter context fits");
        assert_eq!(fit.from, 131_072);
        assert_eq!(fit.needed, 2512, "2k tokens of prompt are 2,000");
        assert!(fit.max_model_len >= 2512 && fit.max_model_len < 131_072);
        assert_eq!(fit.chosen.as_ref().map(|c| c.layout.tp), Some(1));
        assert!(
            fit.sentence().contains("lowered from 131,072"),
            "{}",
            fit.sentence()
        );
    }
}
