//! vLLM's own KV-cache capacity logs (`vllm-kv-logs.csv`: `# GPU blocks` or `GPU KV cache
//! size: N tokens` as vLLM printed them at start-up, with the model, GPU, TP and
//! `gpu_memory_utilization`), read into rows the memory model can be measured on.
//!
//! Each row's model is written as `.dist` ([`model_dist`]: a stdlib model, or the
//! architecture of an older checkpoint from its `config.json`) and its GPU named by a
//! stdlib GPU ([`gpu_dist`]); rows whose model or GPU is not known, or whose TP is not
//! stated, are counted as skipped. The evaluation itself (check a generated deployment,
//! read its KV tokens) is the test's (`tests/calibration.rs`), which goes through the
//! driver like any `.dist` file.

use crate::split_csv;

#[derive(Debug, Clone, PartialEq)]
pub struct KvLogRow {
    pub id: String,
    /// The model column as logged.
    pub model: String,
    /// The stdlib GPU.
    pub gpu: &'static str,
    pub tp: u64,
    /// `gpu_memory_utilization`; vLLM's default (0.9) when the row does not state it.
    pub gmu: f64,
    pub gmu_stated: bool,
    pub max_model_len: Option<u64>,
    pub kv_tokens: f64,
    /// `completeness = full`: every input known.
    pub full: bool,
    /// Logged in 2025 or later (vLLM V1's accounting; older versions profiled otherwise).
    pub recent: bool,
    /// Logged before vLLM's sort-free top-k/top-p samplers (February 2026, PR #33538): its
    /// profile run sorted the vocabulary in the sampler pass.
    pub sorting_sampler: bool,
    /// How the model is written in `.dist`.
    pub model_dist: &'static str,
}

/// The model of a logged row as `.dist`: the text after `model m = ` (a stdlib model
/// with overrides), or a full definition of `m` for a checkpoint the stdlib lacks (its
/// `config.json` figures). `None` for models not mapped.
pub fn model_dist(model: &str) -> Option<&'static str> {
    const LLAMA2_7B: &str = "model m {\n  parameters = 6.74B\n  layers = 32\n  hidden = 4096\n  heads = 32\n  kv_heads = 32\n  intermediate = 11008\n  vocab = 32000\n  max_context = 4096 tokens\n  dtype = fp16\n}";
    const LLAMA2_7B_16K: &str = "model m {\n  parameters = 6.74B\n  layers = 32\n  hidden = 4096\n  heads = 32\n  kv_heads = 32\n  intermediate = 11008\n  vocab = 32000\n  max_context = 16384 tokens\n  dtype = fp16\n}";
    const LLAMA2_70B: &str = "model m {\n  parameters = 69B\n  layers = 80\n  hidden = 8192\n  heads = 64\n  kv_heads = 8\n  intermediate = 28672\n  vocab = 32000\n  max_context = 4096 tokens\n  dtype = fp16\n}";
    const CODELLAMA_13B: &str = "model m {\n  parameters = 13.0B\n  layers = 40\n  hidden = 5120\n  heads = 40\n  kv_heads = 40\n  intermediate = 13824\n  vocab = 32016\n  max_context = 16384 tokens\n  dtype = fp16\n}";
    const OPT_125M: &str = "model m {\n  parameters = 125M\n  layers = 12\n  hidden = 768\n  heads = 12\n  kv_heads = 12\n  intermediate = 3072\n  vocab = 50272\n  max_context = 2048 tokens\n  ungated_mlp = true\n  tied_embeddings = true\n  dtype = fp16\n}";
    let table: &[(&str, &str)] = &[
        ("Qwen/Qwen3-0.6B", "qwen3_0_6b"),
        ("Qwen/Qwen3-8B", "qwen3_8b"),
        ("Qwen/Qwen3-32B", "qwen3_32b"),
        ("meta-llama/Llama-3.1-70B", "llama_3_1_70b"),
        (
            "Meta-Llama-3.1-405B-Instruct-FP8",
            "llama_3_1_405b { weights = fp8, prequantized = true }",
        ),
        (
            "Mixtral-8x7B-Instruct-v0.1-AWQ",
            "mixtral_8x7b { weights = awq, prequantized = true }",
        ),
        ("LlongOrca-7B-16k", LLAMA2_7B_16K),
        ("Llama-2-7B (as", LLAMA2_7B),
        ("Llama-2-70B", LLAMA2_70B),
        ("CodeLlama-13B-Instruct-fp16", CODELLAMA_13B),
        ("facebook/opt-125m", OPT_125M),
    ];
    table
        .iter()
        .find(|(needle, _)| model.contains(needle))
        .map(|(_, m)| *m)
}

/// The stdlib GPU a logged GPU name is; `None` when the row does not say which.
pub fn gpu_dist(gpu: &str) -> Option<&'static str> {
    let table: &[(&str, &str)] = &[
        ("H100", "h100_sxm"),
        ("A100-80GB", "a100_sxm_80gb"),
        ("A100 80GB", "a100_sxm_80gb"),
        ("A100-SXM4-80GB", "a100_sxm_80gb"),
        // "A100 (memory variant not stated)" with 69.66 GiB left for the KV cache: the 80 GB part
        ("A100 (memory variant", "a100_sxm_80gb"),
        ("RTX A6000", "rtx_a6000"),
        ("RTX 6000 Ada", "rtx_6000_ada"),
        ("RTX 4090", "rtx_4090"),
        ("RTX 3090", "rtx_3090"),
        ("L40", "l40"),
    ];
    table
        .iter()
        .find(|(needle, _)| gpu.contains(needle))
        .map(|(_, g)| *g)
}

/// The rows whose model, GPU and TP are known, and how many were skipped.
pub fn parse_kv_logs(csv: &str) -> (Vec<KvLogRow>, usize) {
    let rows = split_csv(csv);
    let Some((head, body)) = rows.split_first() else {
        return (Vec::new(), 0);
    };
    let col = |name: &str| head.iter().position(|h| h == name);
    let (
        Some(id),
        Some(model),
        Some(gpu),
        Some(tp),
        Some(gmu),
        Some(mml),
        Some(logged),
        Some(blocks),
        Some(full),
        Some(date),
    ) = (
        col("id"),
        col("model"),
        col("gpu"),
        col("tp"),
        col("gpu_memory_utilization"),
        col("max_model_len"),
        col("kv_tokens_logged"),
        col("kv_tokens_from_blocks"),
        col("completeness"),
        col("date"),
    )
    else {
        return (Vec::new(), body.len());
    };
    let leading_number = |s: &str| -> Option<f64> {
        let digits: String = s
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        digits.parse().ok()
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for r in body.iter().filter(|r| r.len() == head.len()) {
        let kv = leading_number(&r[logged]).or_else(|| leading_number(&r[blocks]));
        let row = (|| {
            let model_dist = model_dist(&r[model])?;
            Some(KvLogRow {
                id: r[id].clone(),
                model: r[model].clone(),
                gpu: gpu_dist(&r[gpu])?,
                tp: leading_number(&r[tp])? as u64,
                gmu: leading_number(&r[gmu]).unwrap_or(0.9),
                gmu_stated: leading_number(&r[gmu]).is_some(),
                max_model_len: leading_number(&r[mml]).map(|v| v as u64),
                kv_tokens: kv?,
                full: r[full].trim() == "full",
                recent: r[date].as_str() >= "2025",
                sorting_sampler: r[date].as_str() < "2026-02",
                model_dist,
            })
        })();
        match row {
            Some(x) => out.push(x),
            None => skipped += 1,
        }
    }
    (out, skipped)
}

impl KvLogRow {
    /// A `.dist` deployment that starts vLLM as the row did: its model, `tp` GPUs of its
    /// kind in one node, its `gpu_memory_utilization` and `max_model_len`, block size 16.
    pub fn deployment(&self) -> String {
        let model = if self.model_dist.starts_with("model m") {
            self.model_dist.to_string()
        } else {
            format!("model m = {}", self.model_dist)
        };
        let mml = self
            .max_model_len
            .map(|l| format!(", max_model_len = {l} tokens"))
            .unwrap_or_default();
        format!(
            "import std.gpus.*\nimport std.models.*\n{model}\nnode n {{ gpus = {tp} × {gpu} }}\ncluster c {{ nodes = 1 × n }}\n\
             deploy d {{ model = m, cluster = c, layout = tp {tp}, engine = vllm {{ gpu_memory_utilization = {gmu}, block_size = 16{mml} }} }}\n",
            tp = self.tp,
            gpu = self.gpu,
            gmu = self.gmu,
        )
    }
}
