//! Generated sources for benchmarks and tests: a large, valid `.dist` file whose blocks
//! reference each other and the stdlib (the front-end and language-server benchmarks).

/// About `lines` lines: imports, then blocks of GPUs, models, workloads, SLOs, clusters and
/// deployments that reference each other and the stdlib.
pub fn generated(lines: usize) -> String {
    let mut s = String::from("import std.gpus.*\nimport std.nodes.*\nimport std.models.*\n\n");
    let mut i = 0;
    while s.lines().count() < lines {
        s.push_str(&format!(
            "gpu g{i} = h100_sxm {{\n  memory = 80 GiB\n  memory_bandwidth = 3.35 TB/s\n  bf16 = 989 TFLOPS\n}}\n\n\
             model m{i} = llama_3_1_70b {{ weights = fp8, kv_cache = fp8 }}\n\n\
             workload w{i} {{\n  prompt = {p} tokens\n  output = 512 tokens\n  rate = 4 req/s\n}}\n\n\
             slo s{i} {{\n  ttft.p95 <= 800 ms\n  tpot.p95 <= 40 ms\n}}\n\n\
             cluster c{i} {{\n  nodes = 2 × dgx_h100\n  price = $70/h\n}}\n\n\
             deploy d{i} {{\n  model = m{i}\n  cluster = c{i}\n  workload = w{i}\n  slo = s{i}\n  layout = tp 8 × dp 2\n  engine = vllm {{ gpu_memory_utilization = 0.9, max_model_len = 8k tokens }}\n}}\n\n",
            p = 1000 + i
        ));
        i += 1;
    }
    s
}
