//! Analysis behaviours that no explain page pins: the SLO-break concurrency, collective
//! algorithm choice, overrides of estimated memory terms, deployments in files, and the
//! planner's quick pass reaching the checker's verdicts.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::comm::{collective_time, Collective, Placement};
use dic_compiler::analysis::{perf, rules};
use dic_compiler::program::LinkType;
use dic_compiler::source::MemoryWorld;

/// The first deployment's scenario of a source (checked; its diagnostics are not looked at).
fn first_scenario(src: &str) -> dic_compiler::analysis::Scenario {
    let world = MemoryWorld::new().with("p.dist", src);
    let checked = dic_compiler::driver::check_file(&world, "p.dist").unwrap();
    checked.deployments[0].scenario.scenario.clone()
}

fn placement(link_type: LinkType, gbps: f64) -> Placement {
    Placement {
        size: 8,
        spans_nodes: false,
        within_scale_up_domain: true,
        link_name: "l".into(),
        link_type,
        bandwidth: gbps * 1e9,
        latency: 1.9e-6,
    }
}

#[test]
fn all_reduce_takes_the_fastest_algorithm() {
    let nvswitch = placement(LinkType::Nvswitch, 360.0);
    let nvlink = placement(LinkType::Nvlink, 360.0);
    // large messages: NVLS (S/B) beats ring (2(p−1)/p · S/B) on NVSwitch only
    let big = 256e6;
    assert!(
        collective_time(Collective::AllReduce, big, 8, &nvswitch)
            < collective_time(Collective::AllReduce, big, 8, &nvlink)
    );
    // small messages: NVLS's 25 µs latency loses; both links then cost the same
    let small = 16e3;
    assert_eq!(
        collective_time(Collective::AllReduce, small, 8, &nvswitch),
        collective_time(Collective::AllReduce, small, 8, &nvlink)
    );
    // one rank: no communication
    assert_eq!(collective_time(Collective::AllReduce, big, 1, &nvlink), 0.0);
}

/// vLLM's TP all-reduce past its custom kernel's 8 MiB, by hand: on an NVSwitch of 4 or 8
/// GPUs the switch reduces (`S` bytes on the wire per rank), on direct NVLink and on 2
/// GPUs a ring (`2(p−1)/p · S`), and 4 Blackwell GPUs up to 32 MiB run vLLM's two-shot
/// kernel, a ring's bytes; each at the large-message fit of the kernel tables.
#[test]
fn vllm_all_reduce_reduces_in_the_switch_where_vllm_and_nccl_do() {
    use dic_compiler::analysis::comm::{nccl_nvlink_all_reduce, vllm_all_reduce_time};
    let s = 64.0 * 1024.0 * 1024.0;
    let hopper = nccl_nvlink_all_reduce(Some("hopper"));
    let blackwell = nccl_nvlink_all_reduce(Some("blackwell"));
    let at = |p: u64, link: LinkType, arch: &str| {
        let mut l = placement(link, 360.0);
        l.size = p;
        vllm_all_reduce_time(s, p, &l, Some(arch))
    };
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-12;
    // 8 Hopper GPUs on an NVSwitch: 30 µs + S / (360 GB/s × 0.98)
    assert!(close(
        at(8, LinkType::Nvswitch, "hopper"),
        hopper.latency + s / (360e9 * hopper.efficiency)
    ));
    // the same GPUs wired directly: the ring's 1.75 S
    assert!(close(
        at(8, LinkType::Nvlink, "hopper"),
        hopper.latency + 1.75 * s / (360e9 * hopper.efficiency)
    ));
    // two GPUs: no reduction in the switch
    assert!(close(
        at(2, LinkType::Nvswitch, "hopper"),
        hopper.latency + s / (360e9 * hopper.efficiency)
    ));
    // 4 Blackwell GPUs, 64 MiB: past the two-shot kernel's 32 MiB, NCCL's NVLS
    assert!(close(
        at(4, LinkType::Nvswitch, "blackwell"),
        blackwell.latency + s / (360e9 * blackwell.efficiency)
    ));
    // 4 Blackwell GPUs, 16 MiB: vLLM's two-shot kernel, 1.5 S
    let mut l = placement(LinkType::Nvswitch, 360.0);
    l.size = 4;
    let half = s / 4.0;
    assert!(close(
        vllm_all_reduce_time(half, 4, &l, Some("blackwell")),
        blackwell.latency + 1.5 * half / (360e9 * blackwell.efficiency)
    ));
}

/// The calibration's and `dic estimate`'s 8-GPU nodes take the stdlib reference board's
/// link: the HGX NVSwitch for 8 SXM GPUs, nothing for a count no node has.
#[test]
fn eight_sxm_gpus_sit_on_their_reference_boards_nvswitch() {
    use dic_compiler::analysis::catalog::node_scale_up;
    assert_eq!(node_scale_up("h100_sxm", 8).unwrap().name, "nvswitch_h100");
    assert_eq!(node_scale_up("h200_sxm", 8).unwrap().name, "nvswitch_h100");
    assert_eq!(node_scale_up("b200", 8).unwrap().name, "nvswitch_b200");
    assert!(node_scale_up("h100_sxm", 3).is_none());
    assert!(node_scale_up("no_such_gpu", 8).is_none());
}

const PROD: &str = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster c { nodes = 1 × dgx_h100 }\n\
workload w { prompt = 1k tokens, output = 256 tokens, rate = 2 req/s }\n\
slo s { tpot.p95 <= 30 ms }\n\
deploy d { model = llama_3_1_70b, cluster = c, workload = w, slo = s, layout = tp 8, engine = vllm { max_model_len = 8k tokens ACTIVATION } }\n";

#[test]
fn slo_break_concurrency_is_the_edge() {
    let world = MemoryWorld::new().with("p.dist", &PROD.replace(" ACTIVATION", ""));
    let checked = dic_compiler::driver::check_file(&world, "p.dist").unwrap();
    let decided = &checked.deployments[0];
    let (ds, a) = (&decided.scenario, &decided.analysis);
    let n = a
        .slo_break_concurrency
        .expect("a TPOT bound that one request meets");
    assert!(n >= 1.0);
    let tpot_at = |c: f64| {
        let mut s = ds.scenario.clone();
        s.workload = Some(dic_compiler::analysis::WorkloadSpec {
            load: dic_compiler::analysis::Load::Concurrency(c as u64),
            ..s.workload.unwrap()
        });
        let mem = dic_compiler::analysis::memory::memory(&s);
        rules::predicted(&perf::predict(&s, &mem, &perf::FITTED), &ds.slo[0], 256.0)
    };
    assert!(tpot_at(n) <= 0.030, "holds at {n}");
    assert!(
        tpot_at(n + 1.0) > 0.030 || n >= a.prediction.as_ref().unwrap().running_cap.floor(),
        "breaks past {n}"
    );
}

#[test]
fn estimated_memory_terms_can_be_overridden() {
    let base = MemoryWorld::new().with("p.dist", &PROD.replace(" ACTIVATION", ""));
    let over = MemoryWorld::new().with(
        "p.dist",
        &PROD.replace(
            " ACTIVATION",
            ", activation_memory = 10 GiB, non_torch_memory = 1 GiB, cuda_graph_memory = 0 GiB",
        ),
    );
    let kv = |w: &MemoryWorld| {
        let c = dic_compiler::driver::check_file(w, "p.dist").unwrap();
        assert!(!c.has_errors());
        let st = c.deployments[0].analysis.memory.stages[0].clone();
        (st.activations, st.non_torch, st.cuda_graphs, st.kv_cache)
    };
    let (_, _, _, kv_base) = kv(&base);
    let (act, nt, cg, kv_over) = kv(&over);
    assert_eq!((act, nt, cg), (10.0 * 1073741824.0, 1073741824.0, 0.0));
    assert!(kv_over < kv_base);
}

/// The vocabulary `nccl/plan.toml` shares with the runtime: every serialized name is the
/// one the runtime parses back.
#[test]
fn plan_vocabulary_round_trips() {
    use dic_compiler::analysis::comm::{DType, GroupKind};
    let name_of = |v: serde_json::Value| v.as_str().unwrap().to_string();
    for c in Collective::ALL {
        let n = name_of(serde_json::to_value(c).unwrap());
        assert_eq!(n, c.name());
        assert_eq!(Collective::parse(&n), Some(c));
    }
    for k in GroupKind::ALL {
        let n = name_of(serde_json::to_value(k).unwrap());
        assert_eq!(n, k.name());
        assert_eq!(GroupKind::parse(&n), Some(k));
    }
    for d in [DType::F32, DType::Bf16, DType::F16, DType::Fp8, DType::I32] {
        let n = name_of(serde_json::to_value(d).unwrap());
        assert_eq!(n, d.name());
        assert_eq!(DType::parse(&n), Some(d));
    }
}

/// The expert layers' traffic in the EP cases, by hand: Qwen3-30B-A3B (hidden 2048,
/// top-8 of 128 experts, 48 MoE layers), a step of 64 tokens per replica, under vLLM's
/// default all-gather/reduce-scatter and under DeepEP.
#[test]
fn moe_traffic_follows_the_moe_group() {
    use dic_compiler::analysis::comm::{ep_groups, moe_comm, CommContext, GroupKind};
    let scenario = |layout: &str, engine: &str| {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.qwen3_30b_a3b\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
deploy d {{ model = qwen3_30b_a3b, cluster = c, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens{engine} }} }}\n"
        );
        let world = MemoryWorld::new().with("p.dist", &src);
        let checked = dic_compiler::driver::check_file(&world, "p.dist").unwrap();
        assert!(!checked.has_errors(), "{layout}: {:?}", checked.diagnostics);
        checked.deployments[0].scenario.scenario.clone()
    };
    // EP inside one DP rank: the MoE group is the TP group; its AllReduce combines.
    let s = scenario("tp 4 × ep", "");
    assert!(moe_comm(&s, &CommContext::new(&s), 64.0, 48).is_empty());
    // vLLM's default backend, with or without EP, tp 2 × dp 2: each TP rank gathers both
    // replicas' 2 × 64 tokens from its DP group of 2 — hidden states (2048 × 2 B) with
    // their top-8 ids and weights (8 × (4 + 4) B): 128 × 4160 = 532,480 B — and
    // reduce-scatters the outputs (128 × 4096 = 524,288 B), once per MoE layer each.
    for layout in ["tp 2 × dp 2 × ep", "tp 2 × dp 2"] {
        for engine in ["", ", all2all_backend = allgather_reducescatter"] {
            let s = scenario(layout, engine);
            let items = moe_comm(&s, &CommContext::new(&s), 64.0, 48);
            let kinds: Vec<Collective> = items.iter().map(|i| i.collective).collect();
            assert_eq!(kinds, [Collective::AllGather, Collective::ReduceScatter]);
            assert_eq!(
                (items[0].count, items[0].ranks, items[0].bytes),
                (48, 2, 532_480.0)
            );
            assert_eq!(
                (items[1].count, items[1].ranks, items[1].bytes),
                (48, 2, 524_288.0)
            );
            assert_eq!(ep_groups(&s), [vec![0, 2], vec![1, 3]], "{layout}");
        }
    }
    // DeepEP over tp 2 × dp 2 × ep (4 ranks): each rank sends its 32 tokens to the
    // expected 4 (1 − (3/4)^8) = 3.5995 distinct ranks of their experts, 3/4 of them
    // remote: 32 × 3.59954833984375 × 2048 × 2 B × 3/4 = 353,850 B, dispatch and combine.
    for backend in ["deepep_low_latency", "deepep_high_throughput"] {
        let s = scenario(
            "tp 2 × dp 2 × ep",
            &format!(", all2all_backend = {backend}"),
        );
        let items = moe_comm(&s, &CommContext::new(&s), 64.0, 48);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].group, GroupKind::Ep);
        assert_eq!(items[0].collective, Collective::AllToAll);
        assert_eq!(items[0].count, 96);
        assert_eq!(items[0].ranks, 4);
        assert!(
            (items[0].bytes - 353_850.0).abs() < 1e-6,
            "{}",
            items[0].bytes
        );
        assert_eq!(ep_groups(&s), [vec![0, 1, 2, 3]]);
        if backend == "deepep_low_latency" {
            // Inside the node DeepEP's measured kernels set the time, per MoE layer: a
            // dispatch of 52 µs + 353,850 B at 0.35 × 360 GB/s (NVSwitch × 0.8) and a
            // combine of 48 µs + the same bytes at 0.44 × 360 GB/s.
            let per_layer = 52e-6 + 353_850.0 / (0.35 * 360e9) + 48e-6 + 353_850.0 / (0.44 * 360e9);
            assert!(
                (items[0].time - 48.0 * per_layer).abs() < 1e-9,
                "{} vs {}",
                items[0].time,
                48.0 * per_layer
            );
        }
    }
    // DeepEP needs EP: without it the default's traffic stands.
    let s = scenario("tp 2 × dp 2", ", all2all_backend = deepep_low_latency");
    let items = moe_comm(&s, &CommContext::new(&s), 64.0, 48);
    assert_eq!(items[0].collective, Collective::AllGather);
}

/// Qwen3-30B-A3B (48 MoE layers of 128 experts, top 8) at TP 2 on one DGX H100.
fn qwen3_30b_a3b_on_two_h100s() -> dic_compiler::analysis::Scenario {
    let src = "import std.nodes.dgx_h100\nimport std.models.qwen3_30b_a3b\n\
cluster c { nodes = 1 × dgx_h100 }\n\
deploy d { model = qwen3_30b_a3b, cluster = c, layout = tp 2, engine = vllm { max_model_len = 8k tokens } }\n";
    first_scenario(src)
}

/// A decode step's fixed costs by hand: the step's own overhead and one per sequence in
/// each layer (Qwen3-30B-A3B: 48 layers; TP 2, one stage, 8 sequences), stated at hidden
/// 8192 on 3.35 TB/s and scaled to the model's hidden 2048 on the H100's 3.35 TB/s (a
/// quarter); a MoE layer's routing and sorting are part of its experts' time, not of the
/// fixed costs.
#[test]
fn a_moe_steps_overhead_counts_its_layers() {
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    let s = qwen3_30b_a3b_on_two_h100s();
    assert_eq!(
        (s.model.hidden, s.topology.gpu.hbm_bandwidth),
        (2048, 3.35e12)
    );
    let step = StepModel::new(&s).token_step(8.0, 1024.0, 0.0, 0.0, &FITTED);
    let expected = FITTED.step_overhead + 8.0 * 48.0 * FITTED.sequence_layer_overhead * 0.25;
    assert!(
        (step.overhead - expected).abs() < 1e-12,
        "{} vs {expected}",
        step.overhead
    );
    const { assert!(FITTED.sequence_layer_overhead > 0.0) };
}

/// The closed loop's prefill queue by hand (mean value analysis, Reiser's residual term
/// for a deterministic service), one prompt per step: one client never waits; two clients
/// with a prefill of 1 s and 3 s elsewhere: R(1) = 1, X(1) = 1/4, Q(1) = U(1) = 1/4, so
/// R(2) = 1 × (1 + 1/4 − 1/8) = 1.125 s; a fractional client interpolates; a saturated
/// queue approaches N × S − Z − S/2 (the throughput bound 1/S, less the half-done prefill
/// in progress).
#[test]
fn closed_loop_prefills_queue_for_the_budget() {
    use dic_compiler::analysis::perf::{closed_loop_prefill, PromptSteps};
    let one = |s: f64| PromptSteps::single(s);
    assert_eq!(closed_loop_prefill(1.0, &one(0.2), 5.0), 0.2);
    assert!((closed_loop_prefill(2.0, &one(1.0), 3.0) - 1.125).abs() < 1e-12);
    assert!((closed_loop_prefill(1.5, &one(1.0), 3.0) - 1.0625).abs() < 1e-12);
    let saturated = closed_loop_prefill(100.0, &one(1.0), 10.0);
    assert!((saturated - 89.5).abs() < 0.1, "{saturated}");
    // More think time, less queueing.
    assert!(closed_loop_prefill(8.0, &one(0.1), 10.0) < closed_loop_prefill(8.0, &one(0.1), 1.0));
}

/// Prompts that wait together share a step (vLLM fills the step's token budget with the
/// waiting prompts): steps of 1 s for one prompt and 0.5 s more per further prompt, up to
/// 8. Three clients, 3 s elsewhere: R(1) = 1 and R(2) = 1.125 as with one prompt per step
/// (no prompt waits yet); at three, Q(2) = 2 × 1.125 / 4.125 = 0.5455 with U(2) = 0.4848
/// busy, so 0.0606 wait, the arrival's step carries 1.0606 prompts and lasts 1.0303 s:
/// R(3) = 0.4848 × 1.0303 / 2 + 1.0303 = 1.2801 s, against 1.3030 s one at a time.
/// Saturated, 100 clients with 10 s elsewhere and steps of 1 s + 0.25 s per further prompt
/// are bound by 8 prompts per 2.75 s step: R = N × 2.75 / 8 − Z + 2.75 / 2 = 25.75 s, where
/// one prompt per 1 s step gives 89.5 s.
#[test]
fn prompts_that_wait_together_share_a_step() {
    use dic_compiler::analysis::perf::{closed_loop_prefill, open_loop_prefill, PromptSteps};
    let three = closed_loop_prefill(3.0, &PromptSteps::linear(1.0, 0.5, 8.0), 3.0);
    assert!((three - 1.2801).abs() < 1e-4, "{three}");
    let alone = closed_loop_prefill(3.0, &PromptSteps::single(1.0), 3.0);
    assert!((alone - 1.3030).abs() < 1e-4, "{alone}");
    let saturated = closed_loop_prefill(100.0, &PromptSteps::linear(1.0, 0.25, 8.0), 10.0);
    assert!((saturated - 25.75).abs() < 0.05, "{saturated}");
    // The open loop: one prompt per 0.1 s step at 5 prompts/s is the M/D/1 wait,
    // 0.5 × 0.1 / (2 × 0.5) = 0.05 s; at 9 prompts/s, 0.45 s. Sharing steps (0.02 s more per
    // further prompt), at 9/s an arrival finds w = 0.344 prompts waiting, and shares a step
    // of 1.344 prompts (0.1069 s, ρ = 0.716) with them: 0.716 × 0.1069 / 2 = 0.0383 s of
    // the step in progress and 0.0069 s of its own step's extra length, 0.0451 s in all
    // (and w = 9 × 0.0383 = 0.344, Little's law).
    assert!((open_loop_prefill(5.0, &PromptSteps::single(0.1)).wait - 0.05).abs() < 1e-12);
    assert!((open_loop_prefill(9.0, &PromptSteps::single(0.1)).wait - 0.45).abs() < 1e-9);
    let shared = open_loop_prefill(9.0, &PromptSteps::linear(0.1, 0.02, 8.0));
    assert!((shared.wait - 0.0451).abs() < 1e-4, "{shared:?}");
    assert!((shared.busy - 0.7156).abs() < 1e-4, "{shared:?}");
}

/// A MoE step's experts are the fused-MoE kernel's calls, one per MoE layer, on the
/// rank's shard; the kernel tables time the whole `FusedMoE` layer (routing and sorting
/// included), so nothing is added to the calls (Qwen3-30B-A3B: 48 MoE layers of 128
/// experts of width 768, top 8; TP 2 splits every expert's width; 8 decoding sequences).
#[test]
fn a_moe_steps_experts_are_one_fused_moe_call_per_layer() {
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    let s = qwen3_30b_a3b_on_two_h100s();
    let step = StepModel::new(&s).token_step(8.0, 1024.0, 0.0, 0.0, &FITTED);
    let expected = 48.0 * qwen3_30b_call_time(&s, 8.0);
    assert!(
        (step.kernels.experts - expected).abs() < 1e-9 * expected,
        "{} vs {expected}",
        step.kernels.experts
    );
}

/// Qwen3-30B-A3B's fused-MoE call at TP 2 on `tokens` tokens, timed on the scenario's GPU.
fn qwen3_30b_call_time(s: &dic_compiler::analysis::Scenario, tokens: f64) -> f64 {
    use dic_compiler::analysis::fused_moe::{moe_time, MoeCall};
    let call = MoeCall {
        tokens,
        top_k: 8.0,
        experts: 128.0,
        local_experts: 128.0,
        hidden: 2048.0,
        width: 384.0,
        matrices: 3.0,
        bytes_per_param: 2.0,
    };
    let weights = &s.model.weights;
    moe_time(&s.topology.gpu, weights, weights, &call).total()
}

/// A mean step carrying 64 prompt tokens on average stands for one step in 16 carrying a
/// whole 1024-token chunk (the prompt, no workload stated) and 15 decode-only steps: its
/// experts are the mean of those two calls by hand, less than one call at the mean 72
/// tokens, which streams the weights of experts that 8 decoding tokens do not touch.
#[test]
fn a_mean_moe_steps_experts_mix_chunk_and_decode_calls() {
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    let s = qwen3_30b_a3b_on_two_h100s();
    let step = StepModel::new(&s).token_step(8.0, 1024.0, 64.0, 512.0, &FITTED);
    let call = |tokens: f64| qwen3_30b_call_time(&s, tokens);
    let share = 64.0 / 1024.0;
    let expected = 48.0 * (share * call(8.0 + 1024.0) + (1.0 - share) * call(8.0));
    assert!(
        (step.kernels.experts - expected).abs() < 1e-9 * expected,
        "{} vs {expected}",
        step.kernels.experts
    );
    assert!(expected < 0.9 * 48.0 * call(72.0), "{expected}");
}

/// A MoE model's DP ranks step in lockstep: with 2k-token prompts on 4 DP ranks each
/// carrying 256 prompt tokens per step on average (a chunk in 1/8 of its steps), the
/// slowest rank carries a chunk in 1 − (7/8)⁴ of the steps: 2048 × 0.41382 = 847.5
/// tokens, while the experts see all ranks' 1024. A dense model's DP replicas are
/// independent engines.
#[test]
fn moe_dp_ranks_wait_for_the_slowest_ranks_prompt() {
    use dic_compiler::analysis::perf::StepModel;
    let scenario = |model: &str| {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.{model}\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 2048 tokens, output = 512 tokens, concurrency = 64 }}\n\
deploy d {{ model = {model}, cluster = c, workload = w, layout = tp 2 × dp 4 × ep, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        first_scenario(&src)
    };
    let s = scenario("qwen3_30b_a3b");
    let p = StepModel::new(&s).lockstep(256.0);
    let want = 2048.0 * (1.0 - 0.875f64.powi(4));
    assert!((p.rank - want).abs() < 1e-9, "{p:?} vs {want}");
    assert_eq!(p.group, 1024.0);
    let s = scenario("llama_3_1_8b");
    let p = StepModel::new(&s).lockstep(256.0);
    assert_eq!((p.rank, p.group), (256.0, 1024.0));
}

/// TTFT's terms: at one request in flight, the front end's latency (a fixed part and a
/// part per prompt token, 8000 × `prompt_token_latency`) + half a step of arrival wait +
/// the prompt's prefill; past the running cap, the admission wait of
/// Little's law on top of the prefill queue; in a finite run, the first wave that arrives
/// at once; each of them as its own part of `Prediction::ttft_parts`.
#[test]
fn ttft_at_low_load_under_admission_and_in_a_finite_run() {
    use dic_compiler::analysis::perf::{
        closed_loop_prefill, predict, PromptSteps, StepModel, FITTED,
    };
    use dic_compiler::analysis::{memory::memory, Load};
    let src = |load: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 8k tokens, output = 1k tokens, {load} }}\n\
deploy d {{ model = llama_3_1_70b, cluster = c, workload = w, layout = tp 4, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        )
    };
    let scenario = |load: &str| first_scenario(&src(load));
    // one request at a time
    let s = scenario("concurrency = 1");
    let mem = memory(&s);
    let p = predict(&s, &mem, &FITTED);
    let w = s.workload.unwrap();
    let (prompt, output) = (w.prompt, w.output);
    let ctx = prompt + output / 2.0;
    let prefill = StepModel::new(&s).prefill_time(prompt, 0.0, 1.0, ctx, &FITTED);
    assert_eq!(prompt, 8000.0);
    let front = FITTED.request_latency + 8000.0 * FITTED.prompt_token_latency;
    assert_eq!(FITTED.front_end_latency(prompt, 0.0), front);
    let expected = front + p.step.tpot / 2.0 + prefill;
    assert!((p.ttft - expected).abs() < 1e-9, "{} vs {expected}", p.ttft);
    // … and `ttft_parts` names each term
    let t = p.ttft_parts;
    assert_eq!(t.front_end, front);
    assert_eq!(t.step_wait, p.step.tpot / 2.0);
    assert!((t.prefill - prefill).abs() < 1e-12, "{t:?}");
    assert_eq!((t.admission, t.first_wave, t.kv_transfer), (0.0, 0.0, 0.0));
    assert!(
        t.prefill_queue.abs() < 1e-12,
        "one client never queues: {t:?}"
    );
    assert_eq!(t.total(), p.ttft);
    // past the KV cap: the excess waits (n − cap) / cap of a request's time in service
    let s = scenario("concurrency = 4096");
    let mem = memory(&s);
    let p = predict(&s, &mem, &FITTED);
    assert!((p.running - p.running_cap).abs() < 1e-9, "runs at the cap");
    let sm = StepModel::new(&s);
    let pf = sm.prefill_time(prompt, 0.0, p.running, ctx, &FITTED);
    // 8000-token prompts never share the 8192-token budget: one prompt per step.
    let steps = sm.prompt_steps(prompt, 0.0, p.running, ctx, &FITTED);
    assert_eq!(steps, PromptSteps::single(pf));
    let service = pf + output * p.step.tpot;
    let think = front + p.step.tpot / 2.0 + output * p.step.tpot;
    let expected = front
        + p.step.tpot / 2.0
        + closed_loop_prefill(p.running, &steps, think)
        + (4096.0 - p.running) / p.running * service;
    assert!(
        (p.ttft - expected).abs() < 1e-6 * expected,
        "{} vs {expected}",
        p.ttft
    );
    let t = p.ttft_parts;
    let admission = (4096.0 - p.running) / p.running * service;
    assert!((t.admission - admission).abs() < 1e-9 * admission, "{t:?}");
    assert!(
        (t.prefill + t.prefill_queue - closed_loop_prefill(p.running, &steps, think)).abs() < 1e-9,
        "{t:?}"
    );
    assert_eq!(t.total(), p.ttft);
    // a run of 10 × 8 requests: the first 8 arrive at once and queue their prefills
    let steady = {
        let s = scenario("concurrency = 8");
        predict(&s, &memory(&s), &FITTED).ttft
    };
    let s = scenario("concurrency = 8, requests = 80");
    assert!(matches!(s.workload.unwrap().load, Load::Concurrency(8)));
    assert_eq!(s.workload.unwrap().requests, Some(80.0));
    let run = predict(&s, &memory(&s), &FITTED);
    assert!(
        run.ttft > steady * 1.2,
        "first wave: {} vs steady {steady}",
        run.ttft
    );
    // the first wave is the part above the steady state
    let t = run.ttft_parts;
    assert!((t.first_wave - (run.ttft - steady)).abs() < 1e-9, "{t:?}");
    assert_eq!(t.total(), run.ttft);
    // an overloaded open loop with no run to bound it: an unbounded admission wait
    let s = scenario("rate = 1000 req/s");
    let p = predict(&s, &memory(&s), &FITTED);
    assert!(p.overloaded && p.ttft_parts.admission.is_infinite() && p.ttft.is_infinite());
}

/// A benchmark's first wave of short prompts is paced by the front end, not the GPU:
/// Llama-3.1-70B on TP 8, 32 clients of 128-token prompts, a run of 320 requests. The
/// GPU would prefill all 32 prompts (4096 tokens) in one step, but the front end passes
/// them one at a time, `front` apart, and each prompt is then prefilled alone: the i-th
/// (from 0) reaches its first token `(i + 1) × front + pf` after the burst, a mean of
/// `front + 15.5 × front + pf`, and the first wave's share of the run's mean TTFT is
/// `32 / 320` of that burst's excess over the steady state.
#[test]
fn a_first_wave_of_short_prompts_is_paced_by_the_front_end() {
    use dic_compiler::analysis::memory::memory;
    use dic_compiler::analysis::perf::{predict, StepModel, FITTED};
    let scenario = |load: &str| {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 128 tokens, output = 1k tokens, {load} }}\n\
deploy d {{ model = llama_3_1_70b, cluster = c, workload = w, layout = tp 8, engine = vllm {{ max_model_len = 4k tokens }} }}\n"
        );
        first_scenario(&src)
    };
    let steady_s = scenario("concurrency = 32");
    let steady = predict(&steady_s, &memory(&steady_s), &FITTED);
    assert_eq!(steady.running, 32.0);
    assert_eq!(steady.ttft_parts.first_wave, 0.0);
    let s = scenario("concurrency = 32, requests = 320");
    let run = predict(&s, &memory(&s), &FITTED);
    let front = FITTED.request_latency + 128.0 * FITTED.prompt_token_latency;
    assert_eq!(run.ttft_parts.front_end, front);
    let ctx = 128.0 + 1000.0 / 2.0;
    let pf = StepModel::new(&s)
        .prompt_steps(128.0, 0.0, 32.0, ctx, &FITTED)
        .time(1.0);
    assert_eq!(run.ttft_parts.prefill, pf);
    let burst = front + 15.5 * front + pf;
    let expected = (32.0 * burst + 288.0 * steady.ttft) / 320.0 - steady.ttft;
    let t = run.ttft_parts;
    assert!(
        (t.first_wave - expected).abs() < 1e-9 * expected,
        "{} vs {expected}",
        t.first_wave
    );
    // the GPU alone would have served the wave in one step of 32 prompts: far sooner
    let one_step = StepModel::new(&s)
        .prompt_steps(128.0, 0.0, 32.0, ctx, &FITTED)
        .time(32.0);
    assert!(one_step < 15.5 * front, "{one_step} vs {front}");
    assert!((run.ttft - (steady.ttft + expected)).abs() < 1e-9, "{t:?}");
}

/// Short prompts in a closed loop share steps: Llama-3.1-70B on TP 4, 1000-token prompts,
/// 64 in flight. The 8192-token budget less the 64 decodes holds 8 whole prompts, so the
/// queue is served in steps of up to 8 (`StepModel::prompt_steps`), and the wait is the
/// batched closed loop's, shorter than with one prompt per step.
#[test]
fn short_prompts_in_a_closed_loop_share_steps() {
    use dic_compiler::analysis::memory::memory;
    use dic_compiler::analysis::perf::{
        closed_loop_prefill, predict, PromptSteps, StepModel, FITTED,
    };
    let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster c { nodes = 1 × dgx_h100 }\n\
workload w { prompt = 1k tokens, output = 1k tokens, concurrency = 64 }\n\
deploy d { model = llama_3_1_70b, cluster = c, workload = w, layout = tp 4, engine = vllm { max_model_len = 4k tokens } }\n";
    let s = first_scenario(src);
    let p = predict(&s, &memory(&s), &FITTED);
    assert_eq!(p.running, 64.0);
    let (prompt, output) = (1000.0, 1000.0);
    let ctx = prompt + output / 2.0;
    let sm = StepModel::new(&s);
    let pf = sm.prefill_time(prompt, 0.0, p.running, ctx, &FITTED);
    let steps = sm.prompt_steps(prompt, 0.0, p.running, ctx, &FITTED);
    assert_eq!(steps.most(), ((8192.0 - 64.0) / prompt).floor());
    assert_eq!(steps.most(), 8.0);
    assert_eq!(steps.time(1.0), pf);
    // a step of 8 prompts costs less than 8 steps of one: the decodes, overhead and
    // launches are paid once
    assert!(steps.time(8.0) < 8.0 * pf, "{steps:?}");
    let think = FITTED.front_end_latency(prompt, 0.0) + p.step.tpot / 2.0 + output * p.step.tpot;
    let t = p.ttft_parts;
    let batched = closed_loop_prefill(p.running, &steps, think);
    assert!(
        (t.prefill + t.prefill_queue - batched).abs() < 1e-9,
        "{t:?}"
    );
    assert!(batched < closed_loop_prefill(p.running, &PromptSteps::single(pf), think));
}

/// The fused-MoE workspace of vLLM's profile run by hand (Qwen3-235B-A22B: hidden 4096,
/// experts 1536 wide, top 8; an 8192-token budget), as `TritonExperts.workspace_shapes`
/// sizes it: per pair max(I, H) + max(2·I, H) 16-bit elements. On tp 1 × dp 2 the default
/// backend gathers both ranks' tokens (16,384; 0.33 no longer chunks the call) and each
/// rank holds half of every expert (768): 131,072 pairs × (max(768, 4096) + max(1536,
/// 4096)) × 2 B. With EP each rank holds whole experts (1536): the hidden size still
/// decides both buffers.
#[test]
fn the_fused_moe_workspace_counts_the_gathered_pairs() {
    use dic_compiler::analysis::catalog;
    use dic_compiler::analysis::estimate::{self, EstimateRequest};
    use dic_compiler::analysis::memory::fused_moe_workspace;
    use dic_compiler::program::Layout;
    let at = |layout: Layout| {
        let req = EstimateRequest {
            gpu: "h200_sxm".into(),
            layout,
            max_model_len: Some(4096.0),
            max_num_batched_tokens: Some(8192.0),
            ..EstimateRequest::default()
        };
        let model = catalog::model("qwen3_235b_a22b_fp8").unwrap();
        let s = estimate::scenario("qwen3_235b_a22b_fp8", model, &req).unwrap();
        assert_eq!(s.engine.max_num_batched_tokens, 8192);
        fused_moe_workspace(&s)
    };
    let dp2 = Layout {
        tp: 1,
        dp: 2,
        ..Layout::default()
    };
    assert_eq!(at(dp2), 131_072.0 * (4096.0 + 4096.0) * 2.0);
    assert_eq!(
        at(Layout { ep: true, ..dp2 }),
        131_072.0 * (4096.0 + 4096.0) * 2.0
    );
    // One rank: its own 8192 tokens, every expert whole.
    assert_eq!(at(Layout::default()), 65_536.0 * (4096.0 + 4096.0) * 2.0);
    // Four DP ranks: 32,768 tokens, all in one call (older releases chunked at 16,384).
    assert_eq!(
        at(Layout { dp: 4, ..dp2 }),
        262_144.0 * (4096.0 + 4096.0) * 2.0
    );
}

/// Llama-3.1-8B (32 layers) at TP 8 on one DGX B200, 1024-token prompts and 8 in flight,
/// with or without `--enforce-eager`.
/// One sequence's cost per layer for Llama 3.1 8B on a B200, by hand: the constant is stated
/// at hidden 8192 on 3.35 TB/s; the 8B's hidden is 4096, the B200's bandwidth 8 TB/s.
fn b200_8b_sequence_cost(s: &dic_compiler::analysis::Scenario) -> f64 {
    assert_eq!(
        (s.model.hidden, s.topology.gpu.hbm_bandwidth),
        (4096, 8.0e12)
    );
    dic_compiler::analysis::perf::FITTED.sequence_layer_overhead * (4096.0 / 8192.0) * (3.35 / 8.0)
}

fn llama_8b_on_eight_b200s(engine: &str) -> dic_compiler::analysis::Scenario {
    let src = format!(
        "import std.nodes.dgx_b200\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_b200 }}\n\
workload w {{ prompt = 1024 tokens, output = 1024 tokens, concurrency = 8 }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = tp 8, engine = vllm {{ max_model_len = 8k tokens, {engine} }} }}\n"
    );
    first_scenario(&src)
}

/// A step of more tokens than vLLM's largest CUDA graph (1024 on Blackwell) runs its
/// kernels as the CPU launches them: a 1025-token prompt's step on eight B200s lasts the
/// CPU's 32 layers × `eager_layer_time` (its GPU work is far shorter), plus the step's
/// overhead and one sequence's in each layer. At 1024 tokens the step is a graph and
/// runs at its GPU work. Under `--enforce-eager` every step is launched so, decodes too;
/// without it, a decode step pays the CPU's time only in the share of steps that carry a
/// prompt chunk (128 prompt tokens per step of 1024-token prompts: one step in eight).
#[test]
fn steps_without_cuda_graphs_wait_for_the_cpus_launches() {
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    const { assert!(FITTED.eager_layer_time > 0.0) };
    let s = llama_8b_on_eight_b200s("enforce_eager = false");
    let sm = StepModel::new(&s);
    let layers = 32.0;
    let per_sequence = b200_8b_sequence_cost(&s);
    let launched = layers * FITTED.eager_layer_time + FITTED.step_overhead + layers * per_sequence;
    let eager_prefill = sm.prefill_time(1025.0, 0.0, 0.0, 0.0, &FITTED);
    assert!(
        (eager_prefill - launched).abs() < 1e-12,
        "{eager_prefill} vs {launched}"
    );
    let graph_prefill = sm.prefill_time(1024.0, 0.0, 0.0, 0.0, &FITTED);
    assert!(
        graph_prefill < 0.5 * launched,
        "{graph_prefill} vs {launched}"
    );

    let decode = sm.token_step(8.0, 1536.0, 0.0, 0.0, &FITTED);
    assert_eq!(decode.cpu_launches, 0.0);
    let with_prompts = sm.token_step(8.0, 1536.0, 128.0, 512.0, &FITTED);
    assert!(
        with_prompts.cpu_launches > 0.0
            && with_prompts.cpu_launches < layers * FITTED.eager_layer_time / 8.0,
        "{}",
        with_prompts.cpu_launches
    );

    let s = llama_8b_on_eight_b200s("enforce_eager = true");
    let decode = StepModel::new(&s).token_step(8.0, 1536.0, 0.0, 0.0, &FITTED);
    let want =
        layers * FITTED.eager_layer_time + FITTED.step_overhead + 8.0 * layers * per_sequence;
    assert!(
        (decode.tpot - want).abs() < 1e-12,
        "{} vs {want}",
        decode.tpot
    );
    assert!(decode.cpu_launches > 0.0);
}

/// Under `cudagraph_mode: FULL_DECODE_ONLY` a step with a prompt chunk runs without CUDA
/// graphs however small: the 1024-token prompt that is a graph by default waits for the
/// CPU's 32 layers of launches like the 1025-token one, while decode-only steps stay
/// graphs.
#[test]
fn full_decode_only_runs_every_prompt_chunk_without_graphs() {
    use dic_compiler::analysis::memory::memory;
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    use dic_compiler::analysis::scenario::CudaGraphMode;
    let s = llama_8b_on_eight_b200s("cudagraph_mode = full_decode_only");
    assert_eq!(s.engine.cudagraph_mode, CudaGraphMode::FullDecodeOnly);
    // decode steps are still captured: their memory is charged
    assert!(memory(&s).stages[0].cuda_graphs > 0.0);
    let sm = StepModel::new(&s);
    let layers = 32.0;
    let launched = layers * FITTED.eager_layer_time
        + FITTED.step_overhead
        + layers * b200_8b_sequence_cost(&s);
    for prompt in [1024.0, 256.0] {
        let t = sm.prefill_time(prompt, 0.0, 0.0, 0.0, &FITTED);
        assert!((t - launched).abs() < 1e-12, "{prompt}: {t} vs {launched}");
    }
    let decode = sm.token_step(8.0, 1536.0, 0.0, 0.0, &FITTED);
    assert_eq!(decode.cpu_launches, 0.0);
}

/// `cudagraph_mode = none` captures nothing: no graph memory, and a decode-only step of
/// eight sequences waits on the CPU's 32 layers of launches as under `--enforce-eager`.
#[test]
fn cudagraph_mode_none_runs_every_step_without_graphs() {
    use dic_compiler::analysis::memory::memory;
    use dic_compiler::analysis::perf::{StepModel, FITTED};
    let none = llama_8b_on_eight_b200s("cudagraph_mode = none");
    let eager = llama_8b_on_eight_b200s("enforce_eager = true");
    let default = llama_8b_on_eight_b200s("enforce_eager = false");
    assert_eq!(memory(&none).stages[0].cuda_graphs, 0.0);
    assert!(memory(&default).stages[0].cuda_graphs > 0.0);
    let decode = |s: &dic_compiler::analysis::Scenario| {
        StepModel::new(s).token_step(8.0, 1536.0, 0.0, 0.0, &FITTED)
    };
    let (a, b) = (decode(&none), decode(&eager));
    assert!(a.cpu_launches > 0.0, "{a:?}");
    assert!((a.tpot - b.tpot).abs() < 1e-12, "{} vs {}", a.tpot, b.tpot);
    assert_eq!(decode(&default).cpu_launches, 0.0);
}

/// An 8-bit KV cache is read at the kernel family's measured rate per byte
/// (`FP8_KV_READ_FACTOR`): a memory-bound decode step's attention over FP8 KV takes
/// factor ÷ 2 of its time over BF16 KV — 0.92 on Hopper (FlashAttention 3), 0.63 on
/// Blackwell (FlashInfer) — and half where the kernels are not vLLM's (the TensorRT-LLM
/// reference rows).
#[test]
fn an_fp8_kv_cache_is_read_at_its_kernels_measured_rate() {
    use dic_compiler::analysis::gemm::KernelFamily;
    use dic_compiler::analysis::perf::{fp8_kv_read_factor, StepModel, FITTED};
    let attention = |node: &str, kv: &str, vllm: bool| {
        let src = format!(
            "import std.nodes.{node}\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × {node} }}\n\
model m = llama_3_1_8b {{ kv_cache = {kv} }}\n\
workload w {{ prompt = 8k tokens, output = 1k tokens, concurrency = 64 }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = tp 1 × dp 8, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        );
        let world = MemoryWorld::new().with("p.dist", &src);
        let checked = dic_compiler::driver::check_file(&world, "p.dist").unwrap();
        let d = checked
            .deployments
            .first()
            .unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let mut s = d.scenario.scenario.clone();
        s.engine.vllm_attention = vllm;
        // 64 sequences decoding at 8k context: attention is bound by its KV reads.
        StepModel::new(&s)
            .token_step(64.0, 8192.0, 0.0, 0.0, &FITTED)
            .kernels
            .attention
    };
    for (gpu, family) in [
        ("dgx_h100", KernelFamily::Hopper),
        ("dgx_b200", KernelFamily::Blackwell),
    ] {
        let ratio = attention(gpu, "fp8", true) / attention(gpu, "bf16", true);
        let want = fp8_kv_read_factor(family) / 2.0;
        assert!((ratio - want).abs() < 0.02, "{gpu}: {ratio} vs {want}");
        let ratio = attention(gpu, "fp8", false) / attention(gpu, "bf16", false);
        assert!((ratio - 0.5).abs() < 0.02, "{gpu} per byte: {ratio}");
    }
}

/// The planner's quick pass (`remedies` off) and `dic check` reach the same verdicts
/// with the same messages: only the memory errors' help loses what would fit.
/// Deployments that do not fit (weights, one request's KV cache, DeepEP's buffers),
/// and one that does.
#[test]
fn the_quick_pass_reaches_the_same_verdicts() {
    use dic_compiler::analysis::deployable::deployability_findings;
    use dic_compiler::analysis::memory::memory;
    use dic_compiler::analysis::rules::Finding;
    use dic_compiler::diagnostics::{Code, Severity};
    let deployment = |nodes: &str, model: &str, layout: &str, engine: &str| {
        first_scenario(&format!(
            "import std.nodes.{nodes}\nimport std.models.{model}\n\
cluster c {{ nodes = 2 × {nodes} }}\n\
deploy d {{ model = {model}, cluster = c, layout = {layout}, engine = vllm {{ {engine} }} }}\n"
        ))
    };
    let cases = [
        deployment("dgx_h100", "llama_3_1_70b", "tp 1", "max_model_len = 8k tokens"),
        deployment(
            "dgx_h100",
            "llama_3_1_8b",
            "tp 1",
            "max_model_len = 128k tokens, gpu_memory_utilization = 0.3",
        ),
        deployment(
            "dgx_h200",
            "deepseek_v3",
            "tp 1 × dp 16 × ep",
            "max_model_len = 8k tokens, all2all_backend = deepep_low_latency, max_num_batched_tokens = 16384",
        ),
        deployment("dgx_h100", "llama_3_1_8b", "tp 1", "max_model_len = 8k tokens"),
        deployment("dgx_h100", "llama_3_1_70b", "tp 16", "max_model_len = 8k tokens"),
    ];
    let mut refused = 0;
    for s in &cases {
        let mem = memory(s);
        let (quick, full) = (
            deployability_findings(s, &mem, false),
            deployability_findings(s, &mem, true),
        );
        let said = |f: &[Finding]| -> Vec<(Code, Severity, String)> {
            f.iter()
                .map(|f| (f.code, f.severity, f.message.clone()))
                .collect()
        };
        assert_eq!(said(&quick), said(&full), "{}", s.layout);
        for (q, f) in quick.iter().zip(&full) {
            let (q, f) = (q.help.as_deref(), f.help.as_deref());
            assert!(
                f.unwrap_or("").starts_with(q.unwrap_or("")),
                "{q:?} / {f:?}"
            );
        }
        refused += usize::from(quick.iter().any(|f| f.severity == Severity::Error));
    }
    assert_eq!(
        refused, 4,
        "four of the five are refused (E0201, E0202, E0506, E0401)"
    );
    // E0401's remedy (a layout search, a memory model each) is the full pass's alone.
    let across = cases.last().expect("the tp 16 case");
    let mem = memory(across);
    let e0401 = |remedies| {
        deployability_findings(across, &mem, remedies)
            .into_iter()
            .find(|f| f.code == Code::TpAcrossNodes)
            .expect("tp 16 over two 8-GPU nodes is E0401")
    };
    assert_eq!(e0401(false).help, None);
    assert!(
        e0401(true)
            .help
            .is_some_and(|h| h.contains("fits on the same 16 GPUs")),
        "the full pass names a layout that fits on the same GPUs"
    );
}
