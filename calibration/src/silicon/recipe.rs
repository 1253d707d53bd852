//! How each row was measured ([`Recipe`]) and the `vllm serve` flags its recipe passed
//! ([`ServingFlags`]), read from the sources' own scripts: InferenceX's launch scripts
//! (SemiAnalysisAI/InferenceX, `benchmarks/…`) and, for AIConfigurator's own collection,
//! the defaults of the vLLM release the row states.

use super::{quant_format, SiliconRow};

/// How a row was measured: the serving recipe and the benchmark client, which the
/// dataset's sources publish. The row's `backend_version` and `measured_with` (the
/// container image) tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    /// SemiAnalysis's InferenceX runs, imported without a `backend_version` (the ids begin
    /// with the import date). Their recipes (benchmarks/70b_fp8_h100_slurm.sh,
    /// 70b_fp8_h200_slurm.sh, 70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh in
    /// SemiAnalysisAI/InferenceX) serve with `kv-cache-dtype: fp8`,
    /// `max-num-batched-tokens: 8192`, `--gpu-memory-utilization 0.9`, no prefix caching,
    /// `--max-num-seqs` the concurrency on Hopper and 512 on B200, whose compilation config
    /// also sets
    /// `cudagraph_mode: FULL_DECODE_ONLY`; the client (`benchmark_serving.py`, random
    /// dataset, `--ignore-eos`) sends 10 × concurrency requests whose lengths are drawn
    /// uniformly from [0.8 × the stated length, the stated length]
    /// (`--random-range-ratio 0.8`, as aisimulate's replay of these rows states).
    /// The serving flags are the Llama-70B scripts', the only model of this source
    /// imported without its release.
    InferenceX,
    /// InferenceX runs imported with their release and container image (`measured_with`
    /// names a `vllm/vllm-openai` tag): MiniMax-M2.5's. The same client as
    /// [`Recipe::InferenceX`] (`run_benchmark_serving` in benchmarks/benchmark_lib.sh:
    /// random dataset, `--random-range-ratio 0.8` from the workflow's environment,
    /// 10 × concurrency prompts, `--ignore-eos`), and the serving flags of the model's
    /// launch script as it stood while the image was configured ([`ServingFlags::of`]).
    InferenceXImage { vllm: Option<(u32, u32)> },
    /// AIConfigurator's own collection (a `backend_version`, the vLLM release the rows
    /// were measured on, as major and minor): that release's defaults and the stated
    /// lengths.
    Collector { vllm: Option<(u32, u32)> },
}

impl Recipe {
    /// Mean length of a request the client draws for a stated length: InferenceX's
    /// uniform draw from [0.8 L, L] averages 0.9 L.
    pub fn mean_length(self, stated: f64) -> f64 {
        match self {
            Recipe::InferenceX | Recipe::InferenceXImage { .. } => 0.9 * stated,
            Recipe::Collector { .. } => stated,
        }
    }

    /// The release the row states, as major and minor (`None`: InferenceX's 70B rows, or
    /// a nightly build).
    fn vllm(self) -> Option<(u32, u32)> {
        match self {
            Recipe::InferenceX => None,
            Recipe::InferenceXImage { vllm } | Recipe::Collector { vllm } => vllm,
        }
    }

    /// The share of GPU memory vLLM may use where the recipe writes none: vLLM's own
    /// default was 0.9 in the collection's release (0.12) and still in the 0.13/0.14 line
    /// (its `CacheConfig` with `mamba_cache_mode` says 0.9) and is 0.92 by 0.25 (dic's
    /// 0.33 reference). Releases in between, and rows that state none, get 0.33's default
    /// (`None`).
    pub fn default_gpu_memory_utilization(self) -> Option<f64> {
        match self.vllm() {
            Some(version) if version <= (0, 14) => Some(0.9),
            _ => None,
        }
    }

    /// Whether the engine scheduled asynchronously: InferenceX's recipes pass
    /// `--async-scheduling`; vLLM turned it on by default in 0.14 (its release notes:
    /// "Async scheduling is now enabled by default"), so AIConfigurator's 0.12 rows ran
    /// without it and the 0.16–0.19 rows with it; a row whose release is not a number (a
    /// nightly build) or not stated runs 0.33's default, on.
    pub fn async_scheduling(self) -> bool {
        match self {
            Recipe::InferenceX => true,
            Recipe::InferenceXImage { vllm } | Recipe::Collector { vllm } => {
                vllm.is_none_or(|version| version >= (0, 14))
            }
        }
    }

    /// The vLLM release a row ran and how it scheduled, as `errors.md`'s per-family table
    /// names them: `0.12 sync`, `0.19 async`, `InferenceX async` (its image's release is not
    /// stated), `nightly async`.
    pub fn release(self) -> String {
        let scheduling = if self.async_scheduling() {
            "async"
        } else {
            "sync"
        };
        match (self, self.vllm()) {
            (Recipe::InferenceX, _) => format!("InferenceX {scheduling}"),
            (_, Some((major, minor))) => format!("{major}.{minor} {scheduling}"),
            (_, None) => format!("nightly {scheduling}"),
        }
    }
}

/// The recipe a row's `backend_version` and `measured_with` name: InferenceX's 70B
/// imports state no release; its later imports state the release and the
/// `vllm/vllm-openai` image; AIConfigurator's own rows state the release alone. Without
/// the column at all, nothing is known and vLLM 0.33's defaults stand.
pub(super) fn recipe_of(backend_version: Option<&str>, measured_with: Option<&str>) -> Recipe {
    let vllm = |v: &str| {
        let mut parts = v.split('.').map(|p| p.trim().parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(major), Some(minor)) => Some((major, minor)),
            _ => None,
        }
    };
    let image = measured_with.is_some_and(|m| m.contains("vllm/vllm-openai:"));
    match backend_version {
        Some("") => Recipe::InferenceX,
        Some(v) if image => Recipe::InferenceXImage { vllm: vllm(v) },
        Some(v) => Recipe::Collector { vllm: vllm(v) },
        None => Recipe::Collector { vllm: None },
    }
}

/// The `vllm serve` flags a row's recipe passed, beyond its release's defaults (`None`,
/// `false`: the default stood).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServingFlags {
    pub gpu_memory_utilization: Option<f64>,
    pub max_num_seqs: Option<u64>,
    pub max_num_batched_tokens: Option<f64>,
    pub block_size: Option<u64>,
    /// `--kv-cache-dtype fp8`.
    pub fp8_kv_cache: bool,
    /// `--max-cudagraph-capture-size`.
    pub capture_limit: Option<u64>,
    /// `--compilation-config`'s `cudagraph_mode`, as dic's engine option spells it.
    pub cudagraph_mode: Option<&'static str>,
    /// `--enable-expert-parallel` passed whatever the configuration's `ep`: a script whose
    /// test is `[ "$EP_SIZE" -ge 1 ]`, true at the default 1.
    pub expert_parallel: bool,
}

impl ServingFlags {
    /// The flags of `r`'s recipe on a GPU (`blackwell`: B200).
    ///
    /// InferenceX's 70B scripts ([`Recipe::InferenceX`]): FP8 cache (FP8 and NVFP4
    /// weights), 8192 tokens per step, 0.9 of the memory, `--max-num-seqs` the concurrency
    /// on Hopper and 512 on B200 with `FULL_DECODE_ONLY` graphs.
    ///
    /// MiniMax-M2.5's scripts ([`Recipe::InferenceXImage`];
    /// `benchmarks/single_node/minimaxm2.5_{fp8_h100,fp8_h200,fp8_b200,fp4_b200}.sh` as
    /// they stood while `.github/configs/nvidia-master.yaml` named each image):
    /// - H200, v0.16.0 (TP 4 rows): `--gpu-memory-utilization 0.95` only.
    /// - B200, v0.17.0: 0.95, `--block-size=32`, and `--enable-expert-parallel` behind
    ///   `[ "$EP_SIZE" -ge 1 ]` (always). The script also exports
    ///   `VLLM_USE_FLASHINFER_MOE_FP8=0`, which keeps the experts off FlashInfer's TRT-LLM
    ///   kernel, the only block-FP8 kernel the B200 tables time: not modelled.
    /// - H100, v0.18.0: 0.90, `--max-num-seqs 256`, `cudagraph_mode: PIECEWISE`.
    /// - H200, v0.18.0: 0.95 and `--enable-expert-parallel` always (`-ge 1`).
    /// - B200, v0.19.0: 0.90, `--kv-cache-dtype fp8`, `--max-cudagraph-capture-size 2048`,
    ///   `--max-num-batched-tokens` twice the input length, and for FP8 `--block-size=32`.
    /// - B200, the nightly (NVFP4): 0.95, `--block-size=32`, `--kv-cache-dtype fp8`.
    ///
    /// gpt-oss-120b's scripts (`benchmarks/single_node/gptoss_fp4_{h100,h200,b200}.sh`
    /// and their `config.yaml`), the same under every image from v0.11.2 to v0.22.0: 0.9
    /// of the memory, CUDA graphs up to 2048 tokens, 8192 tokens per step, TP only; on
    /// B200 512 sequences and an FP8 cache, on Hopper `--max-num-seqs` the concurrency.
    /// Their scripts also export `VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1` on B200 and
    /// `VLLM_MXFP4_USE_MARLIN=1` on Hopper, which put the experts on TRT-LLM's MXFP4 ×
    /// MXFP8 kernel and on Marlin. vLLM 0.33 reads neither variable, and a scenario has no
    /// other way to state them, so these rows are timed on 0.33's own kernels for gpt-oss
    /// (`analysis::fused_moe::expert_kind`). The curves for both exist: on gpt-oss-120b's
    /// experts (TP 1), MXFP4 × MXFP8 on B200 takes 0.71× the time of the default kernel at
    /// 64 tokens and 0.41× at 2 048; Marlin on H100 takes 1.05× and 1.63×.
    ///
    /// Every one of them turns prefix caching off or leaves it on for random prompts that
    /// share no prefix; neither changes the work. Another model's image rows get their
    /// release's defaults: its script is not read here (InferenceX ran no vLLM
    /// single-node DeepSeek-R1 configuration on NVIDIA GPUs through May 2026).
    pub fn of(r: &SiliconRow, blackwell: bool) -> ServingFlags {
        match r.recipe {
            Recipe::InferenceX => ServingFlags {
                gpu_memory_utilization: Some(0.9),
                max_num_seqs: Some(if blackwell { 512 } else { r.concurrency }),
                max_num_batched_tokens: Some(8192.0),
                fp8_kv_cache: matches!(weights(r), Some("fp8" | "nvfp4")),
                cudagraph_mode: blackwell.then_some("full_decode_only"),
                ..ServingFlags::default()
            },
            Recipe::InferenceXImage { vllm } if r.model.contains("MiniMax-M2.5") => {
                minimax_m2_5(r, blackwell, vllm)
            }
            Recipe::InferenceXImage { .. } if r.model.contains("gpt-oss-120b") => {
                gpt_oss_120b(r, blackwell)
            }
            Recipe::InferenceXImage { .. } | Recipe::Collector { .. } => ServingFlags {
                gpu_memory_utilization: r.recipe.default_gpu_memory_utilization(),
                ..ServingFlags::default()
            },
        }
    }
}

/// The row's weight format in dic's words (`gemm_quant_mode`, [`quant_format`]).
fn weights(r: &SiliconRow) -> Option<&'static str> {
    r.weights.as_deref().and_then(quant_format)
}

/// gpt-oss-120b's InferenceX scripts by GPU ([`ServingFlags::of`]).
fn gpt_oss_120b(r: &SiliconRow, blackwell: bool) -> ServingFlags {
    ServingFlags {
        gpu_memory_utilization: Some(0.9),
        max_num_seqs: Some(if blackwell { 512 } else { r.concurrency }),
        max_num_batched_tokens: Some(8192.0),
        fp8_kv_cache: blackwell,
        capture_limit: Some(2048),
        ..ServingFlags::default()
    }
}

/// MiniMax-M2.5's InferenceX scripts by GPU and image ([`ServingFlags::of`]).
fn minimax_m2_5(r: &SiliconRow, blackwell: bool, vllm: Option<(u32, u32)>) -> ServingFlags {
    let nvfp4 = weights(r) == Some("nvfp4");
    let none = ServingFlags::default();
    match (blackwell, vllm) {
        (false, Some((0, 16))) => ServingFlags {
            gpu_memory_utilization: Some(0.95),
            ..none
        },
        (true, Some((0, 17))) => ServingFlags {
            gpu_memory_utilization: Some(0.95),
            block_size: Some(32),
            expert_parallel: true,
            ..none
        },
        (false, Some((0, 18))) if r.gpu.starts_with("h100") => ServingFlags {
            gpu_memory_utilization: Some(0.90),
            max_num_seqs: Some(256),
            cudagraph_mode: Some("piecewise"),
            ..none
        },
        (false, Some((0, 18))) => ServingFlags {
            gpu_memory_utilization: Some(0.95),
            expert_parallel: true,
            ..none
        },
        (true, Some((0, 19))) => ServingFlags {
            gpu_memory_utilization: Some(0.90),
            block_size: (!nvfp4).then_some(32),
            fp8_kv_cache: true,
            capture_limit: Some(2048),
            max_num_batched_tokens: Some(2.0 * r.isl),
            ..none
        },
        (true, None) => ServingFlags {
            gpu_memory_utilization: Some(0.95),
            block_size: Some(32),
            fp8_kv_cache: true,
            ..none
        },
        _ => ServingFlags {
            gpu_memory_utilization: r.recipe.default_gpu_memory_utilization(),
            ..none
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::{scenario, SiliconRow};
    use super::*;
    use dic_compiler::analysis::catalog;

    /// A MiniMax-M2.5 row as InferenceX's later imports write it; MiniMax-M2.7, the
    /// stdlib's, has M2.5's architecture (both configs in ../shared/models/hf).
    fn minimax(gpu: &str, release: &str, weights: &str, tp: u64, ep: bool) -> SiliconRow {
        let image = format!("image=vllm/vllm-openai:v{release}");
        SiliconRow {
            id: "minimax".into(),
            model: "MiniMaxAI/MiniMax-M2.5".into(),
            gpu: gpu.into(),
            checkpoint: catalog::model("minimax_m2_7"),
            weights: Some(weights.into()),
            expert_weights: Some(weights.into()),
            isl: 1024.0,
            osl: 1024.0,
            concurrency: 16,
            tp,
            pp: 1,
            dp: 1,
            ep,
            one_engine: false,
            recipe: recipe_of(Some(release), Some(&image)),
            ttft: 0.1,
            tpot: 0.01,
        }
    }

    /// The columns name the source: no release is InferenceX's 70B import; a release and
    /// a `vllm/vllm-openai` image, InferenceX's later imports (a nightly's release is not
    /// a number); a release alone, AIConfigurator's collection.
    #[test]
    fn the_columns_name_the_recipe() {
        assert_eq!(recipe_of(Some(""), Some("")), Recipe::InferenceX);
        assert_eq!(
            recipe_of(Some("0.19.0"), Some("image=vllm/vllm-openai:v0.19.0-cu130")),
            Recipe::InferenceXImage {
                vllm: Some((0, 19))
            }
        );
        assert_eq!(
            recipe_of(
                Some("nightly-5b8c30d62b754b57"),
                Some("image=vllm/vllm-openai:nightly-5b8c30d62b754b575e043ce2fc0dcbf8a64f6306")
            ),
            Recipe::InferenceXImage { vllm: None }
        );
        assert_eq!(
            recipe_of(Some("0.12.0"), Some("")),
            Recipe::Collector {
                vllm: Some((0, 12))
            }
        );
        assert_eq!(recipe_of(None, None), Recipe::Collector { vllm: None });
        let image = Recipe::InferenceXImage {
            vllm: Some((0, 19)),
        };
        assert_eq!(image.mean_length(1000.0), 900.0);
        assert_eq!(image.release(), "0.19 async");
    }

    /// MiniMax-M2.5's scripts by GPU and image, as `ServingFlags::of` lists them.
    #[test]
    fn minimax_rows_get_their_scripts_flags() {
        let b200 = ServingFlags::of(&minimax("b200_sxm", "0.19.0", "fp8", 4, false), true);
        assert_eq!(
            b200,
            ServingFlags {
                gpu_memory_utilization: Some(0.90),
                block_size: Some(32),
                fp8_kv_cache: true,
                capture_limit: Some(2048),
                max_num_batched_tokens: Some(2048.0),
                ..ServingFlags::default()
            }
        );
        let nvfp4 = ServingFlags::of(&minimax("b200_sxm", "0.19.0", "nvfp4", 4, false), true);
        assert_eq!(nvfp4.block_size, None);
        let b200_017 = ServingFlags::of(&minimax("b200_sxm", "0.17.0", "fp8", 2, false), true);
        assert!(b200_017.expert_parallel);
        assert_eq!(b200_017.gpu_memory_utilization, Some(0.95));
        let h100 = ServingFlags::of(&minimax("h100_sxm", "0.18.0", "fp8", 4, true), false);
        assert_eq!(
            (h100.max_num_seqs, h100.cudagraph_mode, h100.expert_parallel),
            (Some(256), Some("piecewise"), false)
        );
        let h200 = ServingFlags::of(&minimax("h200_sxm", "0.18.0", "fp8", 8, false), false);
        assert!(h200.expert_parallel);
        let h200_016 = ServingFlags::of(&minimax("h200_sxm", "0.16.0", "fp8", 4, false), false);
        assert!(!h200_016.expert_parallel);
        // gpt-oss-120b's, the same under every image.
        let mut gpt_oss = minimax("b200_sxm", "0.15.1", "mxfp4", 1, false);
        gpt_oss.model = "openai/gpt-oss-120b".into();
        let b200 = ServingFlags::of(&gpt_oss, true);
        assert_eq!(
            (b200.max_num_seqs, b200.fp8_kv_cache, b200.capture_limit),
            (Some(512), true, Some(2048))
        );
        gpt_oss.gpu = "h100_sxm".into();
        let h100 = ServingFlags::of(&gpt_oss, false);
        assert_eq!((h100.max_num_seqs, h100.fp8_kv_cache), (Some(16), false));
        // Another model's image rows: its release's defaults.
        let mut other = minimax("b200_sxm", "0.19.0", "fp8", 8, false);
        other.model = "deepseek-ai/DeepSeek-R1".into();
        assert_eq!(ServingFlags::of(&other, true), ServingFlags::default());
    }

    /// The scenario carries the flags: on B200 with 0.19 a 1024-token prompt step runs as
    /// a CUDA graph (the script's 2048 capture limit, its token budget 2 × 1024), the KV
    /// cache is FP8, the requests average 0.9 of the stated lengths; H200 on 0.18 runs
    /// its experts by EP though the row says none.
    #[test]
    fn the_scenario_carries_the_scripts_flags() {
        let s = scenario(&minimax("b200_sxm", "0.19.0", "fp8", 4, false)).expect("modelled");
        assert_eq!(s.engine.max_num_batched_tokens, 2048);
        assert_eq!(s.engine.written_capture_limit(), Some(2048));
        assert_eq!(s.engine.max_cuda_graph_size(Some("blackwell")), 2048);
        assert_eq!(
            (s.engine.block_size, s.engine.gpu_memory_utilization),
            (32, 0.9)
        );
        assert_eq!(s.model.kv_cache, "fp8");
        assert_eq!(s.workload.map(|w| w.prompt), Some(921.6));
        assert!(!s.layout.ep);
        let h200 = scenario(&minimax("h200_sxm", "0.18.0", "fp8", 8, false)).expect("modelled");
        assert!(h200.layout.ep);
        assert_eq!(h200.engine.gpu_memory_utilization, 0.95);
    }
}
