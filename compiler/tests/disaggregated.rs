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
    // TTFT holds every part, and names them: the front end, the prefill pool's queue,
    // the prefill, the KV transfer and the decode step that emits the first token.
    let p = &d.prediction;
    assert!(p.ttft > d.prefill + d.transfer + p.tpot);
    let t = p.ttft_parts;
    assert_eq!(
        (t.prefill, t.prefill_queue, t.kv_transfer, t.step_wait),
        (d.prefill, d.prefill_wait, d.transfer, p.tpot)
    );
    assert_eq!(t.front_end, FITTED.front_end_latency(4000.0, 0.0));
    assert_eq!(t.total(), p.ttft);
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

/// The checked program of `body` (imports of H200 nodes, Llama 3.1 70B and B200 nodes).
fn checked(body: &str) -> driver::Checked {
    let src = format!(
        "import std.nodes.dgx_h200\nimport std.nodes.dgx_b200\nimport std.models.llama_3_1_70b\n{body}"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::compile_file(&world, "p.dist").unwrap()
}

const PD: &str = "model m = llama_3_1_70b { weights = fp8 }\n\
workload w { prompt = 4k tokens, output = 500 tokens, rate = 1 req/s }\n";

fn codes(c: &driver::Checked) -> Vec<String> {
    c.diagnostics.iter().map(|d| d.code.to_string()).collect()
}

#[test]
fn a_written_split_is_two_pools_predicted_as_the_planner_predicts_it() {
    let c = checked(&format!(
        "{PD}cluster c {{ nodes = 1 × dgx_h200 }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = {{ prefill = tp 2, decode = tp 2 × dp 2 }}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
    ));
    assert!(!c.has_errors(), "{:?}", codes(&c));
    let parts = scenarios_from_program(&c.program);
    assert_eq!(parts.len(), 2);
    let (p, d) = (&parts[0], &parts[1]);
    let pool = |x: &dic_compiler::analysis::DeploymentScenario| x.pool.as_ref().unwrap().pool;
    assert_eq!(pool(p), dic_compiler::program::Pool::Prefill);
    assert_eq!(pool(d), dic_compiler::program::Pool::Decode);
    assert_eq!((p.scenario.layout.tp, p.scenario.layout.dp), (2, 1));
    assert_eq!((d.scenario.layout.tp, d.scenario.layout.dp), (2, 2));
    // The written pair predicts as the planner's split of the same engines does, on
    // both pools' analyses.
    let family = predict(&p.scenario, &split(2, 1, 2, 2), &FITTED).unwrap();
    for part in [p, d] {
        let a = driver::analyze_written(part);
        let got = a.analysis.prediction.unwrap();
        assert!((got.ttft / family.prediction.ttft - 1.0).abs() < 1e-9);
        assert!((got.tpot / family.prediction.tpot - 1.0).abs() < 1e-9);
    }
    // Lowered as two launch units that know each other, both with the NIXL connector.
    let names: Vec<&str> = c.plan.deployments.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["d-prefill", "d-decode"]);
    for x in &c.plan.deployments {
        let pd = x.disaggregated.as_ref().unwrap();
        assert_eq!(pd.prefill_servers.len(), 1);
        assert_eq!(pd.decode_servers.len(), 2);
        assert!(pd.kv_transfer_config.contains("NixlConnector"));
        // Four GPUs of one node: the transfer stays on NVLink, no RDMA needed.
        assert!(!pd.crosses_nodes);
    }
    // Every server of both pools has a port of its own on the shared node.
    let pd = c.plan.deployments[0].disaggregated.as_ref().unwrap();
    let mut ports: Vec<u64> = pd
        .prefill_servers
        .iter()
        .chain(&pd.decode_servers)
        .map(|s| s.1)
        .collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3);
}

#[test]
fn pools_pinned_to_two_groups_move_the_kv_cache_over_the_fabric() {
    let c = checked(&format!(
        "import std.nodes.dgx_h100\n{PD}cluster c {{ nodes = [1 × dgx_h200, 1 × dgx_h100], price = $50/h }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = {{ prefill = tp 4, decode = tp 4, prefill_node_group = dgx_h100, decode_node_group = dgx_h200 }}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
    ));
    assert!(!c.has_errors(), "{:?}", codes(&c));
    let parts = scenarios_from_program(&c.program);
    assert_eq!(parts[0].scenario.topology.gpu.name, "h100_sxm");
    assert_eq!(parts[1].scenario.topology.gpu.name, "h200_sxm");
    let part = parts[1].pool.as_ref().unwrap();
    assert!(!part.same_group);
    let a = driver::analyze_written(&parts[1]);
    assert!(a.analysis.prediction.is_some());
    let (ps, ds) = part.pools(&parts[1].scenario);
    let pair = dic_compiler::analysis::disagg::predict_written(ps, ds, false, &FITTED).unwrap();
    // FP8 KV? No: the model's own BF16 KV cache, 80 × 8 × 128 × 2 × 2 bytes per token.
    let bytes = 80.0 * 8.0 * 128.0 * 2.0 * 2.0 * 4000.0;
    assert!((pair.transfer_bytes / bytes - 1.0).abs() < 0.01);
    // InfiniBand NDR (50 GB/s per port), four streams (TP 4 on each side, 8 NICs).
    let (bandwidth, latency, link) = dic_compiler::analysis::disagg::transfer_link(ps, ds, false);
    assert_eq!(link, "ib_ndr");
    assert!((bandwidth / (4.0 * 50e9) - 1.0).abs() < 1e-9, "{bandwidth}");
    assert!((pair.transfer - (latency + bytes / bandwidth)).abs() / pair.transfer < 0.01);
    // Each pool pays its own node; the plans say the transfer crosses nodes.
    let pd = c.plan.deployments[0].disaggregated.as_ref().unwrap();
    assert!(pd.crosses_nodes);
    let pair = c.forecast.deployments[0].pair.as_ref().unwrap();
    assert_eq!(pair.prefill_cost_per_hour, Some(50.0));
    assert_eq!(pair.cost_per_hour, Some(100.0));
}

/// vLLM's NIXL connector hashes the attention backend into its handshake
/// (`compute_nixl_compatibility_hash`): a B200 prefill pool (FlashInfer) cannot hand its
/// KV blocks to an H200 decode pool (FlashAttention), and E0410 says so; B200 beside B300
/// (both FlashInfer) pairs.
#[test]
fn pools_whose_gpus_pick_different_attention_backends_cannot_pair() {
    let split = |prefill: &str, decode: &str| {
        checked(&format!(
            "import std.nodes.dgx_b300\n{PD}cluster c {{ nodes = [1 × {prefill}, 1 × {decode}] }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = {{ prefill = tp 4, decode = tp 4, prefill_node_group = {prefill}, decode_node_group = {decode} }}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        ))
    };
    let mixed = split("dgx_b200", "dgx_h200");
    let e = mixed
        .diagnostics
        .iter()
        .find(|d| d.code.to_string() == "E0410")
        .unwrap_or_else(|| panic!("{:?}", codes(&mixed)));
    assert!(
        e.message.contains("FLASHINFER") && e.message.contains("FLASH_ATTN"),
        "{}",
        e.message
    );
    assert!(mixed.plan.deployments.is_empty());
    let blackwell = split("dgx_b200", "dgx_b300");
    assert!(
        !codes(&blackwell).contains(&"E0410".to_string()),
        "{:?}",
        codes(&blackwell)
    );
}

#[test]
fn a_pool_layout_is_written_out_and_its_pins_exist() {
    let deploy = |layout: &str| {
        checked(&format!(
            "{PD}cluster c {{ nodes = 2 × dgx_h200 }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        ))
    };
    for (layout, code) in [
        ("{ prefill = auto, decode = tp 2 }", "E0311"),
        ("{ prefill = tp 2 × ep, decode = tp 2 }", "E0311"),
        ("{ prefill = tp 2 × dp 2 × pcp 2, decode = tp 2 }", "E0311"),
        ("{ prefill = tp 2 }", "E0306"),
        (
            "{ prefill = tp 2, decode = tp 2, decode_node_group = dgx_b200 }",
            "E0409",
        ),
        ("{ prefill = tp 8 × dp 2, decode = tp 8 }", "E0408"),
        ("{ prefill = tp 16, decode = tp 2 }", "E0401"),
        (
            "{ prefill = tp 2, decode = tp 2 }, autoscale = { max = 4 }",
            "E0311",
        ),
    ] {
        let c = deploy(layout);
        assert!(
            codes(&c).iter().any(|x| x == code),
            "{layout}: {:?}",
            codes(&c)
        );
        assert!(
            c.plan.deployments.is_empty(),
            "{layout}: half a pair lowered"
        );
    }
}

#[test]
fn a_split_s_pool_names_are_taken() {
    let c = checked(&format!(
        "{PD}cluster c {{ nodes = 2 × dgx_h200 }}\n\
deploy chat_prefill {{ model = m, cluster = c, workload = w, layout = tp 2, engine = vllm {{ max_model_len = 8k tokens }} }}\n\
deploy chat {{ model = m, cluster = c, workload = w, layout = {{ prefill = tp 2, decode = tp 2 }}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
    ));
    assert!(codes(&c).iter().any(|x| x == "E0208"), "{:?}", codes(&c));
}

#[test]
fn a_split_wins_the_auto_layout_only_on_the_aggregated_terms() {
    use dic_compiler::planner::{choose_family, search};
    let (s, slo) = scenario("fp8", "4 req/s");
    let ds_space = dic_compiler::planner::SearchSpace {
        weights: vec!["fp8".into()],
        kv_cache: vec![s.model.kv_cache.clone()],
    };
    let found = search(&s, &slo, &ds_space);
    let ranked = &found.ranked;
    assert!(!ranked.is_empty());
    let mut split = found.splits.first().cloned().unwrap();
    split.meets_slo = true;
    let cheapest = ranked[0].cost_per_hour;
    let rival = ranked
        .iter()
        .filter(|c| c.cost_per_hour <= cheapest + 1e-9)
        .map(|c| c.goodput.as_ref().unwrap().requests_per_s_per_gpu)
        .fold(0.0, f64::max);
    // At the cheapest aggregated cost: 6% more load within the SLOs per $/h than the best
    // aggregated layout of that cost wins, 4% more does not — whatever the saturated
    // capacity says (information only).
    split.cost_per_hour = cheapest;
    let mut g = split
        .goodput
        .clone()
        .or_else(|| ranked[0].goodput.clone())
        .unwrap();
    g.requests_per_s_per_gpu = rival * 1.06;
    split.goodput = Some(g.clone());
    split.capacity_per_gpu = 0.0;
    assert!(choose_family(ranked, Some(&split), &slo, None).0);
    g.requests_per_s_per_gpu = rival * 1.04;
    split.goodput = Some(g);
    split.capacity_per_gpu = 1e9;
    let (wins, why) = choose_family(ranked, Some(&split), &slo, None);
    assert!(!wins);
    assert!(why.unwrap().contains("+4% load within the SLOs"));
    // Cheaper wins whatever it serves; a split missing an SLO never wins; with no
    // aggregated layout meeting the SLOs, a split that meets them does.
    split.cost_per_hour = cheapest * 0.5;
    assert!(choose_family(ranked, Some(&split), &slo, None).0);
    split.meets_slo = false;
    assert!(!choose_family(ranked, Some(&split), &slo, None).0);
    split.meets_slo = true;
    assert!(choose_family(&[], Some(&split), &slo, None).0);
    // A split whose decode pool admits fewer clients than the closed loop declares (the
    // pool's W0501) wins only where a bound limits TTFT: without one, it does not serve.
    split.clients_wait = true;
    let ttft_bounded = slo
        .iter()
        .any(|t| t.metric == dic_compiler::program::SloMetric::Ttft);
    assert_eq!(
        choose_family(ranked, Some(&split), &slo, None).0,
        ttft_bounded
    );
    assert!(!choose_family(ranked, Some(&split), &[], None).0);
    split.clients_wait = false;
    // The search itself says which family and why.
    assert!(found.family_choice.is_some());
}

/// A hybrid model's heterogeneous-TP splits, which E0410 refuses when written, are no
/// candidates (issue 38: `dic plan` recommended them).
#[test]
fn the_family_of_a_hybrid_model_keeps_one_tp_on_both_pools() {
    let src = "import std.nodes.dgx_h200\nimport std.models.qwen3_5_27b\n\
cluster c { nodes = 1 × dgx_h200, price = $60/h }\n\
workload w { prompt = 8k tokens, output = 500 tokens, rate = 2 req/s }\n\
slo s { ttft.p95 <= 2 s, tpot.p95 <= 40 ms }\n\
deploy d { model = qwen3_5_27b, cluster = c, workload = w, slo = s, layout = tp 2, engine = vllm { max_model_len = 16k tokens } }\n";
    let world = MemoryWorld::new().with("p.dist", src);
    let checked = driver::front_end(&world, "p.dist").unwrap();
    let ds = scenarios_from_program(&checked.program).remove(0);
    let family = disaggregated_family(&ds.scenario, &ds.slo);
    assert!(!family.is_empty());
    assert!(
        family
            .iter()
            .all(|c| c.split.prefill.tp == c.split.decode.tp),
        "{:?}",
        family.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
}

/// Row 64: NixlConnector moves Mamba/GDN conv states only in the DS layout, so both pools
/// of a hybrid model get `VLLM_SSM_CONV_STATE_LAYOUT=DS`; a full-attention model's do not.
#[test]
fn hybrid_pools_get_the_ds_conv_state_layout() {
    let pools = |model: &str| {
        let c = checked(&format!(
            "import std.models.{model}\n\
             cluster hopper {{ nodes = 1 × dgx_h200 }}\n\
             workload w {{ prompt = 4k tokens, output = 500 tokens, rate = 1 req/s }}\n\
             deploy pd {{ model = {model}, cluster = hopper, workload = w, layout = {{ prefill = tp 4, decode = tp 4 }}, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        ));
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        c.plan
            .deployments
            .iter()
            .map(|d| d.engine.env.clone())
            .collect::<Vec<_>>()
    };
    let hybrid = pools("qwen3_5_27b");
    assert_eq!(hybrid.len(), 2);
    for env in &hybrid {
        assert!(
            env.contains(&("VLLM_SSM_CONV_STATE_LAYOUT".into(), "DS".into())),
            "{env:?}"
        );
    }
    for env in pools("llama_3_1_8b") {
        assert!(!env.iter().any(|(k, _)| k == "VLLM_SSM_CONV_STATE_LAYOUT"));
    }
}

/// Rows 66 and 67: NIXL pairs TPs that divide one another only (`TransferTopology.tp_ratio`),
/// and its pull connector refuses PP with a hybrid KV layout.
#[test]
fn pools_pair_only_when_one_tp_divides_the_other_and_hybrid_pools_have_no_pp() {
    use dic_compiler::analysis::pools_cannot_pair;
    use dic_compiler::diagnostics::Code;
    let (s, _) = scenario("fp8", "1 req/s");
    let with = |tp: u64, pp: u64| {
        let mut x = s.clone();
        x.layout = Layout {
            tp,
            pp,
            ..Layout::default()
        };
        x
    };
    let f = pools_cannot_pair(&with(2, 1), &with(3, 1)).unwrap();
    assert_eq!(f.code, Code::PoolsCannotPair);
    assert!(f.message.contains("not divisible"), "{}", f.message);
    assert!(pools_cannot_pair(&with(4, 1), &with(2, 1)).is_none());
    // A full-attention model's pools may use PP; a hybrid one's (gpt-oss: sliding + full)
    // may not.
    assert!(pools_cannot_pair(&with(4, 2), &with(4, 1)).is_none());
    let mut hybrid = with(4, 2);
    hybrid.model = dic_compiler::analysis::catalog::model("gpt_oss_120b").unwrap();
    let mut other = with(4, 1);
    other.model = hybrid.model.clone();
    let f = pools_cannot_pair(&hybrid, &other).unwrap();
    assert!(
        f.message.contains("pipeline_parallel_size > 1"),
        "{}",
        f.message
    );
}
