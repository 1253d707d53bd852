//! LoRA adapters and KV offloading as launched: the `lora = { … }` and `kv_offload = { … }`
//! blocks' flags on `vllm serve`, in vLLM 0.33's spelling (`engine/arg_utils.py`: the
//! LoRA group and the OpenAI server's `--lora-modules name=path …`; the cache group's
//! `--kv-offloading-size`/`--kv-offloading-backend`).

pub use crate::program::{KvOffload, LoraSettings};

/// The words `kv_offload` adds to `vllm serve` (`engine/arg_utils.py`: the size in GiB,
/// summed over the engine's TP ranks, and the backend).
pub fn kv_offload_words(k: &KvOffload) -> Vec<String> {
    vec![
        "--kv-offloading-size".to_string(),
        format!("{}", k.size / (1u64 << 30) as f64),
        "--kv-offloading-backend".into(),
        k.backend.clone(),
    ]
}

/// The words `lora` adds to `vllm serve`: `--enable-lora`, the slots and rank the memory
/// check counted, the CPU cache when written, and the adapters loaded at start-up.
pub fn lora_words(l: &LoraSettings) -> Vec<String> {
    let mut words = vec![
        "--enable-lora".to_string(),
        "--max-loras".into(),
        l.max_loras.to_string(),
        "--max-lora-rank".into(),
        l.max_rank.to_string(),
    ];
    if let Some(cpu) = l.max_cpu_loras {
        words.push("--max-cpu-loras".into());
        words.push(cpu.to_string());
    }
    if !l.adapters.is_empty() {
        words.push("--lora-modules".into());
        words.extend(
            l.adapters
                .iter()
                .map(|(name, path)| format!("{name}={path}")),
        );
    }
    words
}
