//! `prefix_reuse` in the search: the planner's layout follows the prefill work the reuse
//! saves where that changes what a replica carries within the SLOs, and stays where the
//! saving is a rounding error of the work.

use super::{scenario_of_text, search, Candidate, SearchSpace};

/// Llama 3.1 8B on one 8 × H100 node, BF16 or FP8, `layout = auto`.
fn chosen(workload: &str, slo: &str) -> Candidate {
    let (s, slo) = scenario_of_text(&format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster node {{ nodes = 1 × dgx_h100, price = $24/h }}\n\
workload w {{ {workload} }}\n\
slo s {{ {slo} }}\n\
deploy d {{ model = llama_3_1_8b, cluster = node, workload = w, slo = s, layout = auto, allowed_weights = [bf16, fp8], engine = vllm {{ max_model_len = 16k tokens }} }}\n"
    ));
    let space = SearchSpace {
        weights: vec!["bf16".into(), "fp8".into()],
        kv_cache: vec![s.model.kv_cache.clone()],
    };
    search(&s, &slo, &space).chosen.expect("a layout")
}

/// One replica's goodput (req/s).
fn per_replica(c: &Candidate) -> f64 {
    c.goodput.as_ref().expect("goodput").requests_per_s / c.layout.dp as f64
}

/// The `rag_prefix_cache` example: 12k prompts, a 1.5k shared prefix, 40% reuse, 6 req/s
/// against a 1 s TTFT. By hand: with reuse a request prefills 12k − max(40% × 12k,
/// 1.5k) = 7.2k tokens, without it 12k − 1.5k = 10.5k, 46% more. The prefill is most of
/// a replica's work here (250 outputs), so one replica's goodput rises by a real margin
/// but by less than 10.5 / 7.2 (the decode steps and the attention over the cached
/// context stay): two FP8 replicas carry 6 req/s with reuse, three without.
#[test]
fn reuse_that_saves_most_of_the_prefill_saves_a_replica() {
    let slo = "ttft.p95 <= 1 s, tpot.p95 <= 30 ms";
    let base =
        "prompt = 12k tokens, output = 250 tokens, rate = 6 req/s, shared_prefix = 1.5k tokens";
    let with = chosen(&format!("{base}, prefix_reuse = 40%"), slo);
    let without = chosen(base, slo);
    assert_eq!(
        (with.layout.tp, with.layout.dp),
        (1, 2),
        "{}",
        with.describe()
    );
    assert_eq!(
        (without.layout.tp, without.layout.dp),
        (1, 3),
        "{}",
        without.describe()
    );
    let gain = per_replica(&with) / per_replica(&without);
    assert!(
        (1.05..10.5 / 7.2).contains(&gain),
        "per-replica goodput ×{gain:.3}"
    );
}

/// 512-token chat prompts with 1k outputs against a 30 ms TPOT: 40% reuse saves 205
/// prefill tokens of the 1.5k tokens each request costs, prefilled in chunks beside the
/// decodes, so the TPOT bound — set by the decode batch — moves by a few percent: at a
/// load that two replicas carry with room either way, the layout is the same.
#[test]
fn reuse_that_saves_little_leaves_the_layout() {
    let slo = "ttft.p95 <= 1 s, tpot.p95 <= 30 ms";
    let base = "prompt = 512 tokens, output = 1k tokens, rate = 16 req/s";
    let with = chosen(&format!("{base}, prefix_reuse = 40%"), slo);
    let without = chosen(base, slo);
    assert_eq!(
        with.layout,
        without.layout,
        "{} vs {}",
        with.describe(),
        without.describe()
    );
    assert_eq!(with.weights, without.weights);
    let gain = per_replica(&with) / per_replica(&without);
    assert!(
        (1.0..1.05).contains(&gain),
        "per-replica goodput ×{gain:.3}"
    );
}
