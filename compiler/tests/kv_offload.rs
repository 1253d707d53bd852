//! KV offloading by hand (`analysis::kv_offload`): the tokens a CPU buffer holds and the
//! PCIe time of a prefix hit, for Llama 3.1 70B (BF16 KV) at TP 4 on H100s.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::kv_offload::{hit_pays, hit_transfer_seconds, offloaded_tokens};
use dic_compiler::analysis::memory::memory;
use dic_compiler::program::Layout;

const GIB: f64 = (1u64 << 30) as f64;

/// Per GPU at TP 4: K and V × 80 layers × 8 KV heads / 4 × 128 × 2 bytes = 81,920 B per
/// token; the engine's four GPUs 327,680. 200 GiB holds 200 × 2^30 / 327,680 = 655,360
/// tokens. An 8,192-token hit moves 8,192 × 81,920 = 671,088,640 B per GPU over PCIe Gen5
/// (63 GB/s per direction, 2.5 µs): 10.652 ms + 2.5 µs = 10.6547 ms.
#[test]
fn llama_3_1_70b_tp4_offloads_655k_tokens_and_a_hit_takes_10_7_ms() {
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        layout: Layout {
            tp: 4,
            ..Layout::default()
        },
        max_model_len: Some(8192.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model("llama_3_1_70b").unwrap();
    let mut s = estimate::scenario("llama_3_1_70b", m, &req).unwrap();
    s.workload = None;
    let per_gpu = memory(&s).stages[0].kv_bytes_per_token;
    assert_eq!(per_gpu, 81_920.0);
    let tokens = offloaded_tokens(200.0 * GIB, per_gpu * 4.0);
    assert_eq!(tokens, 655_360.0);
    let pcie = &s.topology.gpu.pcie;
    assert_eq!(pcie.bandwidth, 63e9);
    assert!((pcie.latency - 2.5e-6).abs() < 1e-15);
    let t = hit_transfer_seconds(8192.0, per_gpu, pcie.bandwidth, pcie.latency);
    assert!((t - 0.010_654_701).abs() < 1e-9, "{t}");
    // Against a prefill of 10k tokens/s per engine (0.1 ms a token: 819 ms for the hit),
    // loading pays; against 1M tokens/s (8.2 ms) it does not.
    assert!(hit_pays(t, 8192.0, 1e-4));
    assert!(!hit_pays(t, 8192.0, 1e-6));
}

use dic_compiler::analysis::deployable::deployability_findings;
use dic_compiler::analysis::kv_offload::{host_memory, pod_memory_cap};
use dic_compiler::diagnostics::Code;
use dic_compiler::source::MemoryWorld;

/// Llama 3.1 8B at `tp 1 × dp 8` on a 2 TiB, 8-GPU node, with `size` GiB of offload
/// buffer per engine.
fn eight_engines_on_a_dgx(size_gib: f64) -> dic_compiler::analysis::Scenario {
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        layout: Layout {
            tp: 1,
            dp: 8,
            ..Layout::default()
        },
        max_model_len: Some(8192.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model("llama_3_1_8b").unwrap();
    let mut s = estimate::scenario("llama_3_1_8b", m, &req).unwrap();
    s.topology.cpu_memory = Some(2048.0 * GIB);
    s.engine.kv_offload = size_gib * GIB;
    s
}

/// Host memory by hand: eight one-GPU pods share a 2 TiB node, so each may request 90% of
/// 256 GiB: 274,877,906,944 / 10 × 9 = 247,390,116,246 B (230.4 GiB). A pod needs 16 GiB
/// (API server) + 8 GiB (one worker) + 2 GiB (/dev/shm, at least 2) + its buffer: 226 GiB
/// with 200 GiB fits, 326 GiB with 300 GiB does not.
#[test]
fn eight_one_gpu_engines_fit_200_gib_each_on_a_2_tib_node_but_not_300() {
    let h = host_memory(&eight_engines_on_a_dgx(200.0), 1).unwrap();
    assert_eq!((h.gpus_per_pod, h.pods_per_node), (1, 8));
    assert_eq!(h.buffer_per_pod, 200 * (1 << 30));
    assert_eq!(h.per_pod, 226 * (1 << 30));
    assert_eq!(h.cap_per_pod, Some(247_390_116_246));
    assert!(h.fits());
    let h = host_memory(&eight_engines_on_a_dgx(300.0), 1).unwrap();
    assert_eq!(h.per_pod, 326 * (1 << 30));
    assert!(!h.fits());
    // Without cpu_memory on the node there is nothing to check against.
    let mut s = eight_engines_on_a_dgx(300.0);
    s.topology.cpu_memory = None;
    assert!(host_memory(&s, 1).unwrap().fits());
}

/// The check and the pod memory rule agree: wherever the check passes, the pod's memory
/// request is what it needs, buffer included (the 90% cap never cuts it); past that, the
/// check refuses the buffer. Swept 1 GiB at a time across the limit (204.4 GiB).
#[test]
fn pod_memory_never_drops_below_the_buffer_where_the_check_passes() {
    let mut passed = 0;
    for size in 190..=220 {
        let s = eight_engines_on_a_dgx(size as f64);
        let h = host_memory(&s, 1).unwrap();
        let requested = dic_compiler::ir::pod_memory(
            1,
            2 * (1 << 30),
            (size as u64) << 30,
            Some(pod_memory_cap(2048.0 * GIB, 1, 8)),
        );
        let m = memory(&s);
        let codes: Vec<Code> = deployability_findings(&s, &m, true)
            .iter()
            .map(|f| f.code)
            .collect();
        if h.fits() {
            passed += 1;
            assert_eq!(requested, h.per_pod, "{size} GiB");
            assert!(!codes.contains(&Code::HostMemoryShort), "{size} GiB");
        } else {
            assert!(requested < h.per_pod);
            assert!(codes.contains(&Code::HostMemoryShort), "{size} GiB");
        }
    }
    // 190..=204 GiB fit: 26 GiB + 204 GiB = 230 GiB ≤ 230.4 GiB.
    assert_eq!(passed, 15);
}

/// The checker: E0508 names the figures and the largest buffer that fits
/// (247,390,116,246 − 26 GiB = 219,472,828,822 B = 204.40 GiB); W0504 when the workload
/// declares no reuse.
#[test]
fn the_checker_refuses_300_gib_and_warns_on_offload_without_reuse() {
    let src = |size: &str, reuse: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
             cluster one {{ nodes = 1 × dgx_h100 }}\n\
             workload chat {{ prompt = 8k tokens, output = 300 tokens, rate = 4 req/s{reuse} }}\n\
             deploy d {{ model = llama_3_1_8b\n cluster = one\n workload = chat\n layout = tp 1 × dp 8\n\
             kv_offload = {{ size = {size}, backend = native }} }}\n"
        )
    };
    let check = |text: String| {
        let world = MemoryWorld::new().with_bytes("x.dist", text.as_bytes());
        dic_compiler::driver::check_file(&world, "x.dist").unwrap()
    };
    let c = check(src("300 GiB", ", prefix_reuse = 80%"));
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::HostMemoryShort)
        .unwrap();
    assert!(
        d.message.contains("each 1-GPU pod needs 326.00 GiB"),
        "{}",
        d.message
    );
    assert!(d.message.contains("(230.40 GiB a pod)"), "{}", d.message);
    let help = d.help.clone().unwrap_or_default();
    assert!(help.contains("at most 204.40 GiB per engine"), "{help}");
    let c = check(src("200 GiB", ", prefix_reuse = 80%"));
    let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
    assert!(!codes.contains(&Code::HostMemoryShort), "{codes:?}");
    assert!(!codes.contains(&Code::OffloadWithoutReuse), "{codes:?}");
    let c = check(src("200 GiB", ""));
    let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
    assert!(codes.contains(&Code::OffloadWithoutReuse), "{codes:?}");
}

use dic_compiler::analysis::kv_offload::offloaded_share;
use dic_compiler::analysis::perf::{predict, FITTED};
use dic_compiler::analysis::{Load, WorkloadSpec};

/// The offload tier's share by hand: 600k tokens of idle prefixes, 200k of free GPU
/// room, a 1.3M-token buffer: 400k spill, all held by the buffer, 2/3 of the prefixes.
/// A buffer of 100k holds 1/6; nothing spills when the GPU has room for all.
#[test]
fn the_offload_tier_holds_what_the_gpu_cache_cannot() {
    assert!((offloaded_share(600e3, 200e3, 1.3e6) - 2.0 / 3.0).abs() < 1e-12);
    assert!((offloaded_share(600e3, 200e3, 100e3) - 1.0 / 6.0).abs() < 1e-12);
    assert_eq!(offloaded_share(600e3, 700e3, 1.3e6), 0.0);
    assert_eq!(offloaded_share(0.0, 0.0, 1.3e6), 0.0);
}

/// A TTFT with hits from the CPU tier: Llama 3.1 8B (BF16 KV) at TP 1 on an H100, 200
/// clients of 8k-token conversations whose earlier 6k tokens are cached. One GPU holds
/// 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B a token, so 100 GiB holds
/// 819,200 tokens, and a 6k-token prefix loads in 6,000 × 131,072 B / 63 GB/s + 2.5 µs
/// = 12.4855 ms. The running requests fill the GPU cache; the waiting clients' prefixes
/// ((200 − running) × 6,000 tokens) spill past its free room into the buffer, and that
/// share of requests pays the load in TTFT — the only part that moves.
#[test]
fn a_closed_loop_pays_the_pcie_load_for_prefixes_the_cpu_tier_holds() {
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        max_model_len: Some(16384.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model("llama_3_1_8b").unwrap();
    let mut s = estimate::scenario("llama_3_1_8b", m, &req).unwrap();
    let mut w = WorkloadSpec::new(8000.0, 200.0, Load::Concurrency(200), None);
    w.cached_prompt = 6000.0;
    w.declared_reuse = 6000.0;
    s.workload = Some(w);
    let mem = memory(&s);
    assert_eq!(mem.stages[0].kv_bytes_per_token, 131_072.0);
    let without = predict(&s, &mem, &FITTED);
    assert_eq!(without.ttft_parts.kv_offload_load, 0.0);
    s.engine.kv_offload = 100.0 * GIB;
    let with = predict(&s, &mem, &FITTED);
    let running = with.running;
    assert!(running < 200.0, "{running}");
    let idle = (200.0 - running) * 6000.0;
    let free = mem.kv_cache_tokens as f64 - running * 8100.0;
    let share = (idle - free.max(0.0)).clamp(0.0, 819_200.0) / idle;
    assert!(share > 0.5, "{share}");
    let load = share * 0.012_485_547_6;
    assert!(
        (with.ttft_parts.kv_offload_load - load).abs() < 1e-9,
        "{} vs {load}",
        with.ttft_parts.kv_offload_load
    );
    assert!((with.ttft - without.ttft - load).abs() < 1e-9);
    assert_eq!(with.tpot, without.tpot);
}

/// E0509: a `pod = { memory }` below what the pod needs with its offload buffer. One
/// 1-GPU pod with 100 GiB of buffer needs 100 + 16 + 8 + 2 (`/dev/shm`) = 126 GiB: 64 GiB
/// is refused, 126 GiB passes, and so does leaving it out.
#[test]
fn a_written_pod_memory_below_the_offload_buffer_is_refused() {
    let src = |pod: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
             cluster one {{ nodes = 1 × dgx_h100 }}\n\
             workload chat {{ prompt = 8k tokens, output = 300 tokens, rate = 4 req/s, prefix_reuse = 80% }}\n\
             deploy d {{ model = llama_3_1_8b\n cluster = one\n workload = chat\n layout = tp 1\n\
             kv_offload = {{ size = 100 GiB, backend = native }}{pod} }}\n"
        )
    };
    let check = |text: String| {
        let world = MemoryWorld::new().with_bytes("x.dist", text.as_bytes());
        dic_compiler::driver::check_file(&world, "x.dist").unwrap()
    };
    let c = check(src("\n pod = { memory = 64 GiB }"));
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::PodMemoryBelowOffload)
        .unwrap();
    assert!(
        d.message
            .contains("needs with KV offloading: 126.00 GiB (100.00 GiB of offload buffer"),
        "{}",
        d.message
    );
    assert!(d.message.contains("OOM"), "{}", d.message);
    let help = d.help.clone().unwrap_or_default();
    assert!(help.contains("at least 126.00 GiB"), "{help}");
    for pod in ["\n pod = { memory = 126 GiB }", ""] {
        let c = check(src(pod));
        let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
        assert!(
            !codes.contains(&Code::PodMemoryBelowOffload),
            "{pod}: {codes:?}"
        );
    }
}
