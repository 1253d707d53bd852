//! The defaults a field's documentation states, each written once: a literal in a
//! macro here, from which both the constant dic reads and the schema's doc text
//! (`concat!`) take it, so the two cannot drift apart. `vllm_default!` holds vLLM 0.33's
//! defaults for the engine options, `dic_default!` dic's own.

/// vLLM 0.33's defaults for the options a `.dist` file may leave unset
/// (`EngineArgs.get_batch_defaults`, `CacheConfig`; ../shared/reference/vllm-0.33.md
/// §2.2), each written once: here, from where both the constant the models read
/// ([`vllm_defaults`]) and the option's documentation in [`crate::schema::VLLM_OPTIONS`] take it.
macro_rules! vllm_default {
    (port) => {
        8000
    };
    (gpu_memory_utilization) => {
        0.92
    };
    (max_num_seqs_large_gpu) => {
        1024
    };
    (max_num_seqs) => {
        256
    };
    (max_num_batched_tokens_160gib) => {
        16384
    };
    (max_num_batched_tokens_large_gpu) => {
        8192
    };
    (max_num_batched_tokens) => {
        2048
    };
    (block_size) => {
        16
    };
    (mla_block_size) => {
        64
    };
    (spec_tokens) => {
        3
    };
}

/// vLLM 0.33's defaults, as the models read them (the values: `vllm_default!`).
pub mod vllm_defaults {
    /// The API server's port (`--port`).
    pub const PORT: u64 = vllm_default!(port);
    pub const GPU_MEMORY_UTILIZATION: f64 = vllm_default!(gpu_memory_utilization);
    /// `max_num_seqs` on a large GPU ([`crate::analysis::scenario::GpuSpec::is_large_for_vllm`]).
    pub const MAX_NUM_SEQS_LARGE_GPU: u64 = vllm_default!(max_num_seqs_large_gpu);
    /// `max_num_seqs` on other GPUs.
    pub const MAX_NUM_SEQS: u64 = vllm_default!(max_num_seqs);
    /// `max_num_batched_tokens` on a GPU with at least 160 GiB.
    pub const MAX_NUM_BATCHED_TOKENS_160GIB: u64 = vllm_default!(max_num_batched_tokens_160gib);
    /// `max_num_batched_tokens` on another large GPU.
    pub const MAX_NUM_BATCHED_TOKENS_LARGE_GPU: u64 =
        vllm_default!(max_num_batched_tokens_large_gpu);
    /// `max_num_batched_tokens` on other GPUs.
    pub const MAX_NUM_BATCHED_TOKENS: u64 = vllm_default!(max_num_batched_tokens);
    pub const BLOCK_SIZE: u64 = vllm_default!(block_size);
    /// FlashMLA's preferred block size for MLA models.
    pub const MLA_BLOCK_SIZE: u64 = vllm_default!(mla_block_size);
    /// Tokens drafted per step (`--spec-tokens`) when `speculative` leaves it unset.
    pub const SPEC_TOKENS: u64 = vllm_default!(spec_tokens);
}

/// dic's own defaults for fields a `.dist` file may leave unset, each written once: here,
/// from where both the value dic reads ([`dic_defaults`]) and the field's documentation
/// take it.
macro_rules! dic_default {
    (image) => {
        "vllm/vllm-openai:v0.33.0"
    };
    // The vLLM project's ROCm image of the same release, for AMD GPUs (vLLM's docs,
    // `docs/getting_started/installation/gpu.rocm.inc.md` "pre-built images": Docker
    // Hub's `vllm/vllm-openai-rocm`, tagged `v<release>` as the CUDA image is).
    (rocm_image) => {
        "vllm/vllm-openai-rocm:v0.33.0"
    };
    (autoscale_waiting) => {
        5
    };
    // Speculative acceptance per drafted token, in percent, by method.
    (acceptance_eagle3) => {
        70
    };
    (acceptance_eagle) => {
        60
    };
    (acceptance_mtp) => {
        80
    };
    (acceptance_draft_model) => {
        60
    };
    (acceptance_ngram) => {
        30
    };
    // The endpoint picker's scorer weights and image: llm-d-inference-scheduler v0.8.0's
    // `deploy/config/epp-precise-prefix-cache-config.yaml` (prefix 2, KV use 1, queue 1)
    // and its Makefile's image (`ghcr.io/llm-d/` + PROJECT_NAME, tagged by release).
    (queue_weight) => {
        1
    };
    (kv_weight) => {
        1
    };
    (prefix_weight) => {
        2
    };
    (epp_image) => {
        "ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"
    };
}

/// dic's own defaults (the values: `dic_default!`).
pub mod dic_defaults {
    /// The vLLM image the targets pin (the release dic's flags are checked against).
    pub const IMAGE: &str = dic_default!(image);
    /// The same release's ROCm image, which AMD GPUs get instead.
    pub const ROCM_IMAGE: &str = dic_default!(rocm_image);
    /// Requests waiting per replica that add one (production-stack's threshold).
    pub const AUTOSCALE_WAITING: u64 = dic_default!(autoscale_waiting);
    /// The endpoint picker's scorer weights when `routing` leaves them unset.
    pub const QUEUE_WEIGHT: u64 = dic_default!(queue_weight);
    pub const KV_WEIGHT: u64 = dic_default!(kv_weight);
    /// Only when the workload declares prefix reuse; otherwise the scorer is not loaded.
    pub const PREFIX_WEIGHT: u64 = dic_default!(prefix_weight);
    /// llm-d's endpoint picker (EPP) image.
    pub const EPP_IMAGE: &str = dic_default!(epp_image);

    /// The chance each drafted token is accepted, by method (one of
    /// [`crate::schema::SPEC_METHODS`]). [heuristic: typical chat-traffic rates that EAGLE-3,
    /// DeepSeek-V3's MTP and prompt-lookup papers and vLLM's blog report at 2–3 drafted
    /// tokens; they move with the task, so the field says measure.]
    pub fn spec_acceptance(method: &str) -> f64 {
        let percent: u32 = match method {
            "eagle3" => dic_default!(acceptance_eagle3),
            "mtp" => dic_default!(acceptance_mtp),
            "ngram" => dic_default!(acceptance_ngram),
            "draft_model" => dic_default!(acceptance_draft_model),
            _ => dic_default!(acceptance_eagle),
        };
        f64::from(percent) / 100.0
    }
}
