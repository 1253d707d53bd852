//! What a row's names mean to dic: its `model_path` resolved to a checkpoint (the stdlib's,
//! its own config imported by the caller, a base or instruct release, a quantized one), its
//! quantization columns to dic's formats, and its `system` to the catalog's GPU.

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::scenario::*;
use dic_compiler::program::Model;

/// The checkpoint a Hugging Face id names, as a dic model:
/// 1. the stdlib model whose `hf` is the id (case aside);
/// 2. else `configs(id)`: the checkpoint's own `config.json` (and quantization config),
///    which the caller reads and imports (`import_hf`), the core doing no IO;
/// 3. else the stdlib model of the same architecture under another release name: base
///    and instruct checkpoints share one (`meta-llama/Llama-3.1-70B` is
///    `llama_3_1_70b`, whose `hf` is the Instruct one);
/// 4. else a quantized release of one of those, named by a format suffix (`-FP8`,
///    `-NVFP4`, …): the base model with its weights in that format. NVIDIA's ModelOpt
///    releases (`nvidia/…`) also quantize the KV cache to FP8 — their
///    `hf_quant_config.json` declares `kv_cache_quant_algo: FP8`, as seven of the eight in
///    ../shared/models/hf do — and vLLM's `--kv-cache-dtype auto` follows the checkpoint
///    (`resolve_kv_cache_dtype_string` in vllm/utils/torch_utils.py). Qwen's own FP8
///    releases (block scales, `quant_method: fp8`) declare none and keep a 16-bit cache.
///    (With a 16-bit cache the 8B FP8's decode-bound row — 4000 × 2000 at 128 in flight —
///    was predicted 56% slow; with FP8, 9% slow.)
pub fn resolve_checkpoint(hf: &str, configs: &dyn Fn(&str) -> Option<Model>) -> Option<Model> {
    let models: Vec<Model> = catalog::model_names()
        .iter()
        .filter_map(|n| catalog::model(n))
        .collect();
    let by_id = |id: &str| {
        models
            .iter()
            .find(|m| m.hf.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(id)))
            .cloned()
    };
    let by_release = |id: &str| {
        let want = release_name(id);
        models
            .iter()
            .find(|m| m.hf.as_deref().is_some_and(|h| release_name(h) == want))
            .cloned()
    };
    if let Some(m) = by_id(hf).or_else(|| configs(hf)).or_else(|| by_release(hf)) {
        return Some(m);
    }
    let (base, format) = quantized_release(hf)?;
    let mut m = by_id(&base)
        .or_else(|| configs(&base))
        .or_else(|| by_release(&base))?;
    m.weights = format.into();
    m.prequantized = true;
    if hf.to_ascii_lowercase().starts_with("nvidia/") {
        m.kv_cache = "fp8".into();
    }
    Some(m)
}

/// An id's model name without its organisation, in lower case, without the words that
/// name a release rather than an architecture (`instruct`, `chat`, `it`, `hf`, a leading
/// `meta`, a four-digit date stamp): `meta-llama/Meta-Llama-3.1-70B-Instruct` →
/// `llama-3.1-70b`, `deepseek-ai/DeepSeek-R1-0528` → `deepseek-r1`,
/// `Qwen/Qwen3-235B-A22B-Instruct-2507` → `qwen3-235b-a22b`. A dated release retrains
/// the weights of the architecture it names (its `config.json` keeps the layers, heads
/// and experts); what it may change, the context length, the rows state themselves.
fn release_name(id: &str) -> String {
    let name = id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase();
    let date_stamp = |w: &str| w.len() == 4 && w.bytes().all(|b| b.is_ascii_digit());
    let words: Vec<&str> = name
        .split(['-', '_'])
        .filter(|w| !matches!(*w, "instruct" | "chat" | "it" | "hf") && !date_stamp(w))
        .collect();
    let words = match words.split_first() {
        Some((&"meta", rest)) if !rest.is_empty() => rest.to_vec(),
        _ => words,
    };
    words.join("-")
}

/// A quantized release's base id and its weight format, from the suffix that names the
/// format (`nvidia/Llama-3.1-8B-Instruct-FP8` → `nvidia/Llama-3.1-8B-Instruct`, fp8),
/// after a revision of the quantized release (`nvidia/DeepSeek-R1-0528-FP4-v2` →
/// `nvidia/DeepSeek-R1-0528`, nvfp4).
fn quantized_release(hf: &str) -> Option<(String, &'static str)> {
    let revision = hf.rsplit_once(['-', '_']).filter(|(_, tail)| {
        let tail = tail.to_ascii_lowercase();
        tail.strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    let hf = revision.map_or(hf, |(head, _)| head);
    let lower = hf.to_ascii_lowercase();
    [
        ("-fp8-dynamic", "fp8"),
        ("-fp8", "fp8"),
        ("-nvfp4", "nvfp4"),
        ("-fp4", "nvfp4"),
        ("-mxfp4", "mxfp4"),
        ("-awq", "awq"),
        ("-gptq-int4", "gptq"),
        ("-int4", "int4"),
        ("-w8a8", "int8"),
    ]
    .iter()
    .find(|(suffix, _)| lower.ends_with(suffix))
    .map(|(suffix, format)| (hf[..hf.len() - suffix.len()].to_string(), *format))
}

/// A weight format as the dataset's `gemm_quant_mode` / `moe_quant_mode` name it, in dic's
/// words; `None` for one dic does not model (the checkpoint's own format is kept).
pub(super) fn quant_format(mode: &str) -> Option<&'static str> {
    Some(match mode.to_ascii_lowercase().as_str() {
        "bfloat16" | "bf16" | "float16" | "fp16" => "bf16",
        "fp8" | "fp8_block" | "fp8_static" | "fp8_ootb" => "fp8",
        "nvfp4" => "nvfp4",
        "mxfp4" | "w4a16_mxfp4" => "mxfp4",
        "int8_wo" | "int8" => "int8",
        "int4_wo" | "int4" => "int4",
        _ => return None,
    })
}

/// The catalog GPU (and its scale-up link) a dataset `system` names. The dataset writes
/// AIConfigurator's system names, the GPU and its form factor (`h100_sxm`, `gb200_sxm`,
/// `a100_sxm`, `rtx_pro_6000_server`): the catalog is asked for the name as written,
/// then without the form factor (the catalog's `a100` is the 80 GB SXM part).
pub fn system_gpu(system: &str) -> Option<(GpuSpec, Option<LinkSpec>)> {
    let s = system.trim().to_ascii_lowercase();
    let bare = ["_blackwell_server", "_server", "_sxm"]
        .iter()
        .find_map(|suffix| s.strip_suffix(suffix))
        .unwrap_or(&s);
    catalog::gpu(&s).or_else(|| catalog::gpu(bare))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row's `model_path` resolves to the stdlib model by its `hf` id, by the same
    /// architecture's other release (base or instruct), or as a quantized release of one
    /// (a format suffix; NVIDIA's ModelOpt releases with an FP8 cache); `configs` is asked
    /// before the name rules, and nothing else is guessed.
    #[test]
    fn checkpoints_resolve_by_id_release_and_format_suffix() {
        let none = |_: &str| None;
        let get = |id: &str| resolve_checkpoint(id, &none).map(|m| (m.hf, m.weights, m.kv_cache));
        let llama70 = Some("meta-llama/Llama-3.1-70B-Instruct".to_string());
        // By id, case aside.
        assert_eq!(
            get("META-LLAMA/llama-3.1-70b-instruct").map(|m| m.0),
            Some(llama70.clone())
        );
        // The base release is the instruct one's architecture, in its own format.
        assert_eq!(
            get("meta-llama/Llama-3.1-70B"),
            Some((llama70, "bf16".into(), "auto".into()))
        );
        // A ModelOpt FP8 release: FP8 weights and cache.
        let (hf, weights, kv) = get("nvidia/Llama-3.1-8B-Instruct-FP8").expect("resolves");
        assert_eq!(hf.as_deref(), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!((weights.as_str(), kv.as_str()), ("fp8", "fp8"));
        // Qwen's own FP8 release of a model the stdlib has only in BF16: the cache stays
        // `auto`, the model's 16-bit dtype.
        let (hf, weights, kv) = get("Qwen/Qwen3-30B-A3B-FP8").expect("resolves");
        assert_eq!(hf.as_deref(), Some("Qwen/Qwen3-30B-A3B"));
        assert_eq!((weights.as_str(), kv.as_str()), ("fp8", "auto"));
        // The stdlib's own FP8 release wins over the suffix rule.
        assert_eq!(
            get("Qwen/Qwen3-235B-A22B-FP8").map(|m| m.0),
            Some(Some("Qwen/Qwen3-235B-A22B-FP8".to_string()))
        );
        // Dated releases of an architecture the stdlib holds, and a revision of a
        // quantized one.
        for (id, stdlib) in [
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
            ("deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3"),
            ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen/Qwen3-235B-A22B"),
            (
                "moonshotai/Kimi-K2-Instruct-0905",
                "moonshotai/Kimi-K2-Instruct",
            ),
        ] {
            assert_eq!(get(id).and_then(|m| m.0).as_deref(), Some(stdlib), "{id}");
        }
        let (hf, weights, kv) = get("nvidia/DeepSeek-R1-0528-FP4-v2").expect("resolves");
        assert_eq!(hf.as_deref(), Some("deepseek-ai/DeepSeek-R1"));
        assert_eq!((weights.as_str(), kv.as_str()), ("nvfp4", "fp8"));
        // A version in the name is not a revision, nor a size a date stamp.
        assert_eq!(
            get("mistralai/Mixtral-8x7B-Instruct-v0.1").map(|m| m.1),
            Some("bf16".into())
        );
        assert_eq!(get("Qwen/Qwen3-8B-2507"), get("Qwen/Qwen3-8B"));
        assert_eq!(get("example/Model-1000-v2"), None);
        // Unknown: nothing, unless the caller's configs know it.
        assert_eq!(get("example/Unknown-7B"), None);
        let qwen = catalog::model("qwen3_8b").expect("stdlib");
        let configs = |id: &str| (id == "example/Unknown-7B").then(|| qwen.clone());
        assert_eq!(
            resolve_checkpoint("example/Unknown-7B", &configs),
            Some(qwen.clone())
        );
        // A quantized release of a model only the configs know.
        let m = resolve_checkpoint("example/Unknown-7B-NVFP4", &configs).expect("resolves");
        assert_eq!((m.weights.as_str(), m.prequantized), ("nvfp4", true));
    }

    /// AIConfigurator's system names resolve to the catalog's GPUs, with or without their
    /// form factor; a GPU the catalog lacks resolves to nothing.
    #[test]
    fn system_names_resolve_to_catalog_gpus() {
        let name = |s: &str| system_gpu(s).map(|(g, _)| g.name);
        for (system, gpu) in [
            ("h100_sxm", "h100_sxm"),
            ("h200_sxm", "h200_sxm"),
            ("b200_sxm", "b200"),
            ("gb200_sxm", "gb200"),
            ("b300_sxm", "b300"),
            ("gb300_sxm", "gb300"),
            ("a100_sxm", "a100_sxm_80gb"),
            ("l40s", "l40s"),
            ("h20_sxm", "h20"),
            ("rtx_pro_6000_server", "rtx_pro_6000"),
            ("rtxpro6000_blackwell_server", "rtx_pro_6000"),
        ] {
            assert_eq!(name(system).as_deref(), Some(gpu), "{system}");
        }
        assert_eq!(name("h800_sxm"), None);
    }
}
