//! `dic compile`'s engine options and numbers: compilation-config keys merged with the
//! user's, `dic estimate` refusing what a `.dist` file would, token counts as integers,
//! one rank placement read by every output, and token prices that sum to a request's cost.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::{examples, generate};

/// `cudagraph_mode` is written as one key of `--compilation-config`: other keys passed
/// one by one in `extra_args` merge with it in vLLM's parser, while a whole JSON would be
/// replaced by the merged keys, and a `cudagraph_mode` of the user's own would disagree
/// with the model; both are refused (E0314) with the way to write them.
#[test]
fn cudagraph_mode_leaves_other_compilation_keys_to_extra_args() {
    let check = |engine: &str| {
        let src = format!(
            "import std.nodes.dgx_b200\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_b200 }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, layout = tp 8, engine = vllm {{ {engine} }} }}\n"
        );
        let world = dic_compiler::source::MemoryWorld::new().with("g.dist", &src);
        let checked = dic_compiler::driver::compile_file(&world, "g.dist").unwrap();
        (common::rendered(&checked), checked)
    };
    let keys = r#"cudagraph_mode = full_decode_only, extra_args = ["--compilation-config.pass_config.fuse_allreduce_rms=true"]"#;
    let (text, checked) = check(keys);
    assert!(!checked.has_errors(), "{text}");
    let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
    let argv = common::first_argv(&files["d/vllm/commands.json"]);
    assert_eq!(
        common::value_after(&argv, "--compilation-config.cudagraph_mode").as_deref(),
        Some("FULL_DECODE_ONLY")
    );
    assert!(argv.contains(&"--compilation-config.pass_config.fuse_allreduce_rms=true".into()));
    let whole = r#"cudagraph_mode = full_decode_only, extra_args = ["--compilation-config", "{\"pass_config\": {}}"]"#;
    let (text, checked) = check(whole);
    assert!(checked.has_errors(), "{text}");
    assert!(
        text.contains("E0314") && text.contains("--compilation-config.KEY=VALUE"),
        "{text}"
    );
    // without the field, a whole JSON is the user's to write — but not its cudagraph_mode
    let (text, checked) = check(r#"extra_args = ["-cc", "{\"pass_config\": {}}"]"#);
    assert!(!checked.has_errors(), "{text}");
    let (text, _) = check(r#"extra_args = ["-cc.cudagraph_mode=NONE"]"#);
    assert!(
        text.contains("E0314") && text.contains("cudagraph_mode = …"),
        "{text}"
    );
}

/// Every number `dic estimate` takes is checked as the `.dist` field it stands for, with
/// the schema's table (`--isl` as `workload.prompt`, `--price-per-node` as
/// `cluster.price`, `--gpu-memory-utilization` as the engine option): a value a
/// file would be refused for exits 2 with the flag and its range, never a prediction
/// for a nonsense load (a negative prompt, NaN, a fraction of a token budget) or a
/// silent clamp (`--concurrency 0` read as 1).
#[test]
fn dic_estimate_refuses_every_number_a_dist_file_would() {
    for (flag, value, says) in [
        ("--gpu-memory-utilization", "1.5", "out of range"),
        ("--isl", "-5", "more than 0 tokens"),
        ("--isl", "nan", "more than 0 tokens"),
        ("--isl", "0", "more than 0 tokens"),
        ("--osl", "0", "more than 0 tokens"),
        ("--osl", "inf", "more than 0 tokens"),
        ("--isl", "1e300", "1e300"),
        ("--concurrency", "0", "between 1 and"),
        ("--rate", "0", "more than 0 req/s"),
        ("--price-per-node", "-1", "at least 0 $/h"),
        ("--price-per-node", "nan", "at least 0 $/h"),
        ("--max-num-batched-tokens", "4096.5", "a whole number"),
        ("--max-model-len", "8192.5", "a whole number"),
        ("--max-num-seqs", "0", "between 1 and"),
        ("--gpus-per-node", "0", "at least 1"),
        ("--nodes", "0", "at least 1"),
    ] {
        let arg = format!("{flag}={value}");
        let o = common::estimate_8b_h100(&[&arg]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(flag) && err.contains(says), "{arg}: {err}");
        assert!(o.stdout.is_empty(), "{arg}: no estimate printed");
    }
    // As users type them, with a space: a negative number is the flag's value (not an
    // unknown argument), and --num-requests is the workload's `requests`, checked alike.
    for (flag, value, says) in [
        ("--isl", "-5", "more than 0 tokens"),
        ("--price-per-node", "-1", "at least 0 $/h"),
        ("--num-requests", "0", "between 1 and"),
        ("--num-requests", "2000000000", "between 1 and"),
    ] {
        let o = common::estimate_8b_h100(&[flag, value]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(&format!("{flag} = {value} is out of range")) && err.contains(says),
            "{flag} {value}: {err}"
        );
    }
    // A fractional mean length is a mean, not a typo.
    let o = common::estimate_8b_h100(&["--isl", "1000.5"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// vLLM takes its token budgets as integers: a fraction in a `.dist` file is a typo
/// refused with E0307, not a value truncated into the launch command.
#[test]
fn token_counts_vllm_takes_as_integers_refuse_fractions() {
    use dic_compiler::source::MemoryWorld;
    for engine in ["max_model_len = 4096.7", "max_num_batched_tokens = 8192.5"] {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 1k tokens, output = 256 tokens, concurrency = 4 }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = tp 1, \
engine = vllm {{ {engine} }} }}\n"
        );
        let world = MemoryWorld::new().with("p.dist", &src);
        let checked = dic_compiler::driver::compile_file(&world, "p.dist").unwrap();
        let text = common::rendered(&checked);
        assert!(checked.has_errors(), "{engine}: {text}");
        assert!(
            text.contains("E0307") && text.contains("a whole number"),
            "{engine}: {text}"
        );
    }
}

/// One rank placement, read by every output: a replica that fits a node stays on one
/// node even when it does not divide the node's GPUs (`pp 3` on 8-GPU nodes, two replicas
/// per node, 4 nodes for 8 replicas), and the report's node count, the NCCL plan's ranks,
/// the launch commands' nodes and CUDA_VISIBLE_DEVICES all say the same.
#[test]
fn every_output_reads_the_same_rank_placement() {
    use dic_compiler::source::MemoryWorld;
    for (layout, nodes) in [
        ("tp 1 × pp 3 × dp 8", 4),
        ("tp 2 × dp 8", 2),
        ("tp 8 × pp 2", 2),
    ] {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 4 × dgx_h100, price = $98/h }}\n\
workload w {{ prompt = 1k tokens, output = 256 tokens, rate = 2 req/s }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        let world = MemoryWorld::new().with("p.dist", &src);
        let checked = dic_compiler::driver::compile_file(&world, "p.dist").unwrap();
        assert!(!checked.has_errors(), "{}", common::rendered(&checked));
        let d = &checked.plan.deployments[0];
        let f = &checked.forecast.deployments[0];
        let ranks = &d.comm.ranks;
        let used = ranks.iter().map(|k| k.node).max().unwrap() + 1;
        assert_eq!(used, nodes, "{layout}: nodes the ranks occupy");
        assert_eq!(f.report.cost.nodes, nodes, "{layout}: the report's nodes");
        assert_eq!(d.nodes, nodes, "{layout}: the plan's nodes");
        assert!(
            (f.report.cost.per_hour.unwrap() - 98.0 * nodes as f64).abs() < 1e-9,
            "{layout}: priced by the nodes it occupies"
        );
        // no two ranks on one GPU
        let mut gpus: Vec<(u64, u64)> = ranks.iter().map(|k| (k.node, k.local_gpu)).collect();
        gpus.sort();
        gpus.dedup();
        assert_eq!(gpus.len(), ranks.len(), "{layout}: one rank per GPU");
        // a replica that fits a node is on one node
        let per_replica = d.layout.replica_gpus() as usize;
        if per_replica <= 8 {
            for replica in ranks.chunks(per_replica) {
                assert!(
                    replica.iter().all(|k| k.node == replica[0].node),
                    "{layout}: replica {} spans nodes",
                    replica[0].dp_replica
                );
            }
        }
        // the launch commands run where the ranks are
        let commands = dic_targets::vllm::commands(d);
        for c in &commands {
            assert!(
                c.node_rank < nodes,
                "{layout}: a command on node {}",
                c.node_rank
            );
            if let Some(devices) = c.env.get("CUDA_VISIBLE_DEVICES") {
                let on_node: Vec<String> = ranks
                    .iter()
                    .filter(|k| k.node == c.node_rank)
                    .map(|k| k.local_gpu.to_string())
                    .collect();
                for g in devices.split(',') {
                    assert!(
                        on_node.iter().any(|x| x == g),
                        "{layout}: GPU {g} of node {} has no rank",
                        c.node_rank
                    );
                }
            }
        }
        let nccl: toml::Value = toml::from_str(&dic_targets::nccl::plan_toml(d).unwrap()).unwrap();
        let plan_nodes = nccl["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["node"].as_integer().unwrap())
            .max()
            .unwrap()
            + 1;
        assert_eq!(plan_nodes as u64, nodes, "{layout}: the NCCL plan's nodes");
    }
}

/// The report's token prices sum to the true cost of a request: an API-style price of
/// `prompt × input + output × output` per million equals the hour over the requests it
/// serves (issue: input and output each carried the whole hour, pricing a request twice).
#[test]
fn token_prices_sum_to_the_cost_of_a_request() {
    let mut priced = 0;
    for path in examples() {
        for (file, text) in generate(&path) {
            if !file.ends_with("report.json") {
                continue;
            }
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            let r = &json["report"];
            let cost = &r["cost"];
            let (Some(input), Some(output), Some(per_request)) = (
                cost["per_million_input_tokens"].as_f64(),
                cost["per_million_output_tokens"].as_f64(),
                cost["per_request"].as_f64(),
            ) else {
                continue;
            };
            let prompt = r["prompt_tokens"].as_f64().unwrap();
            let out = r["output_tokens"].as_f64().unwrap();
            let api = (prompt * input + out * output) / 1e6;
            assert!(
                (api - per_request).abs() <= 1e-9 * per_request.max(1e-12),
                "{file}: {api} vs {per_request}"
            );
            let share = cost["input_share"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{file}");
            priced += 1;
        }
    }
    assert!(priced >= 5, "only {priced} priced reports");
}

/// DeepSeek-R1 `tp 8 × dp 9 × ep` on a GB200 NVL72 rack (18 trays of 4 GPUs): each DP rank
/// spans two trays, which vLLM 0.33 launches (`ParallelConfig.nnodes_within_dp`) and dic
/// refused with E0801. Every tray runs `vllm serve` with `--nnodes 18` and its own
/// `--node-rank`, the trays past the head `--headless`; vLLM infers one DP rank per pair
/// of trays, so no `--data-parallel-size-local`. The LeaderWorkerSet spans all 18 trays.
#[test]
fn a_moe_dp_rank_may_span_the_trays_of_an_nvl72_rack() {
    use dic_compiler::source::MemoryWorld;
    let src = "import std.nodes.gb200_nvl72\nimport std.models.deepseek_r1\n\
workload w { prompt = 2k tokens, output = 1k tokens, rate = 20 req/s }\n\
deploy r1 { model = deepseek_r1, cluster = gb200_nvl72, workload = w, layout = tp 8 × dp 9 × ep, \
engine = vllm { max_model_len = 32k tokens } }\n";
    let world = MemoryWorld::new().with("p.dist", src);
    let checked = dic_compiler::driver::compile_file(&world, "p.dist").unwrap();
    assert!(!checked.has_errors(), "{}", common::rendered(&checked));
    let d = &checked.plan.deployments[0];
    assert_eq!((d.nodes_per_group, d.nodes_per_dp_rank), (18, 2));
    let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
    let script = |k: u64| {
        files
            .iter()
            .find(|(name, _)| name.ends_with(&format!("vllm/node-{k}.sh")))
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| panic!("no node-{k}.sh in {:?}", files.keys()))
    };
    let head = script(0);
    for flag in [
        "--tensor-parallel-size 8",
        "--nnodes 18",
        "--node-rank 0",
        "--data-parallel-size 9",
        "--data-parallel-address",
        "--master-addr",
    ] {
        assert!(head.contains(flag), "{flag} missing:\n{head}");
    }
    assert!(!head.contains("--headless"), "{head}");
    assert!(!head.contains("--data-parallel-size-local"), "{head}");
    let third = script(3);
    assert!(
        third.contains("--node-rank 3") && third.contains("--headless"),
        "{third}"
    );
    let lws = files
        .iter()
        .find(|(name, _)| name.ends_with("leaderworkerset.yaml"))
        .map(|(_, t)| t.clone())
        .expect("a LeaderWorkerSet");
    assert!(lws.contains("size: 18"), "{lws}");
    assert!(lws.contains("--headless"), "{lws}");
}
