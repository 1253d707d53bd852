//! The disaggregated family: splits that do not fit are left out, the KV transfer is the
//! prompt's KV cache over the link the pools share, the prefill pool queues, and the
//! family is ranked with those meeting the SLOs first.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::disagg::{predict, PoolSplit};
use dic_compiler::analysis::perf::FITTED;
use dic_compiler::analysis::scenarios_from_program;
use dic_compiler::driver;
use dic_compiler::planner::disaggregated_family;
use dic_compiler::program::Layout;
use dic_compiler::source::MemoryWorld;

fn scenario(
    weights: &str,
    rate: &str,
) -> (
    dic_compiler::analysis::Scenario,
    Vec<dic_compiler::analysis::rules::SloTarget>,
) {
    let src = format!(
        "import std.nodes.dgx_h200\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b {{ weights = {weights} }}\n\
cluster c {{ nodes = 1 × dgx_h200, price = $60/h }}\n\
workload w {{ prompt = 4k tokens, output = 500 tokens, rate = {rate} }}\n\
slo s {{ ttft.p95 <= 2 s, tpot.p95 <= 40 ms }}\n\
deploy d {{ model = m, cluster = c, workload = w, slo = s, layout = tp 8, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    let checked = driver::front_end(&world, "p.dist").unwrap();
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let ds = scenarios_from_program(&checked.program).remove(0);
    (ds.scenario, ds.slo)
}

fn split(tp_p: u64, x: u64, tp_d: u64, y: u64) -> PoolSplit {
    PoolSplit {
        prefill: Layout {
            tp: tp_p,
            ..Layout::default()
        },
        prefill_replicas: x,
        decode: Layout {
            tp: tp_d,
            ..Layout::default()
        },
        decode_replicas: y,
    }
}

#[test]
fn pools_that_do_not_fit_or_exceed_the_cluster_are_left_out() {
    let (s, _) = scenario("bf16", "1 req/s");
    // 70B in BF16 does not fit one H200 for prefill with room for KV.
    assert!(predict(&s, &split(1, 1, 4, 1), &FITTED).is_none());
    // 12 GPUs on an 8-GPU cluster.
    assert!(predict(&s, &split(4, 1, 8, 1), &FITTED).is_none());
    assert!(predict(&s, &split(4, 1, 4, 1), &FITTED).is_some());
}

#[test]
fn the_transfer_is_the_prompt_s_kv_over_the_shared_link_and_the_prefill_pool_queues() {
    let (s, _) = scenario("fp8", "1 req/s");
    let d = predict(&s, &split(2, 1, 2, 1), &FITTED).unwrap();
    // Llama 3.1 70B: 80 layers × 8 KV heads × 128 × (K and V) × 2 bytes per token.
    let per_token = 80.0 * 8.0 * 128.0 * 2.0 * 2.0;
    assert!(
        (d.transfer_bytes / (per_token * 4000.0) - 1.0).abs() < 0.01,
        "{}",
        d.transfer_bytes
    );
    // Inside one node, over NVLink, two streams (the narrower TP): a few milliseconds.
    assert!(d.transfer > 0.5e-3 && d.transfer < 10e-3, "{}", d.transfer);
    // More load on the same prefill pool: a longer wait before the prefill.
    let (busier, _) = scenario("fp8", "3 req/s");
    let b = predict(&busier, &split(2, 1, 2, 1), &FITTED).unwrap();
    assert!(b.prefill_wait > d.prefill_wait);
    assert!((b.prefill - d.prefill).abs() < 1e-12);
    // TTFT holds every part.
    let p = &d.prediction;
    assert!(p.ttft > d.prefill + d.transfer + p.tpot);
}

#[test]
fn the_family_ranks_what_meets_the_slos_first() {
    let (s, slo) = scenario("fp8", "4 req/s");
    let family = disaggregated_family(&s, &slo);
    assert!(family.iter().any(|c| c.meets_slo));
    assert!(family.iter().all(|c| c.gpus <= 8));
    let first_miss = family
        .iter()
        .position(|c| !c.meets_slo)
        .unwrap_or(family.len());
    assert!(family[first_miss..].iter().all(|c| !c.meets_slo));
    for pair in family[..first_miss].windows(2) {
        assert!(pair[0].cost_per_hour <= pair[1].cost_per_hour);
    }
}
