//! KV offloading to CPU memory (`kv_offload = { … }`, vLLM 0.33's
//! `--kv-offloading-size`): the prefix-cache capacity it adds and what a hit costs.
//!
//! vLLM's offloading connector copies KV blocks the GPU evicts into a CPU buffer of
//! `kv_offloading_size` GiB per engine, summed over its TP ranks (`config/cache.py`); a
//! later prompt whose prefix is there loads the blocks back instead of prefilling them.
//! Each TP rank moves its own shard over its own PCIe link, so a hit of `n` tokens takes
//! `n × (KV bytes per token per GPU) / (PCIe bandwidth per direction)` on every rank at
//! once. It pays when that is shorter than prefilling the same tokens (long shared
//! prefixes, multi-turn chat), and when the GPU's own cache is too small to keep them.

/// Tokens of KV cache the CPU buffer holds: `size` over the engine's KV bytes per token
/// (every layer on every GPU of the engine).
pub fn offloaded_tokens(size_bytes: f64, engine_kv_bytes_per_token: f64) -> f64 {
    if engine_kv_bytes_per_token <= 0.0 {
        return 0.0;
    }
    (size_bytes / engine_kv_bytes_per_token).floor()
}

/// Seconds to bring `tokens` of a hit back to the GPUs: each rank's shard over its own
/// PCIe link (`gpu_kv_bytes_per_token`: one GPU's share), plus the link's latency.
pub fn hit_transfer_seconds(
    tokens: f64,
    gpu_kv_bytes_per_token: f64,
    pcie_bytes_per_second: f64,
    pcie_latency: f64,
) -> f64 {
    if tokens <= 0.0 {
        return 0.0;
    }
    pcie_latency + tokens * gpu_kv_bytes_per_token / pcie_bytes_per_second
}

/// Whether loading a hit beats prefilling it again: the transfer against the prefill
/// time of the same tokens (`prefill_seconds_per_token` at the engine's prefill rate).
pub fn hit_pays(transfer_seconds: f64, tokens: f64, prefill_seconds_per_token: f64) -> bool {
    transfer_seconds < tokens * prefill_seconds_per_token
}
