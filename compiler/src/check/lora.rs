//! A deployment's `lora = { … }` block → [`LoraSettings`], with vLLM 0.33's start-up
//! checks on it (`vllm/config/lora.py`): the rank is one of `MaxLoRARanks`, the CPU cache
//! holds at least `max_loras` adapters (`LoRAConfig._validate_lora_config`), and every
//! adapter is `name=path` (`--lora-modules`' form).

use super::reader::Reader;
use super::*;
use crate::program::LoraSettings;

/// vLLM 0.33's `MaxLoRARanks`: the ranks `--max-lora-rank` accepts.
pub const VLLM_LORA_RANKS: &[u64] = &[1, 8, 16, 32, 64, 128, 256, 320, 512];
/// vLLM's defaults (`LoRAConfig`): one adapter per batch, rank 16.
pub const DEFAULT_MAX_LORAS: u64 = 1;
pub const DEFAULT_MAX_RANK: u64 = 16;

impl Checker<'_, '_> {
    /// `lora = { … }` as typed settings; `None` when absent or after an error.
    pub(super) fn lora(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        r: &Reader<'_>,
    ) -> Option<LoraSettings> {
        let b = r.block("lora")?;
        let at = f.get("lora").map(|v| v.at)?;
        let l = Reader(b);
        let max_loras = l.uint("max_loras").unwrap_or(DEFAULT_MAX_LORAS);
        let max_rank = l.uint("max_rank").unwrap_or(DEFAULT_MAX_RANK);
        let max_cpu_loras = l.uint("max_cpu_loras");
        let written = l.strings("adapters");
        let adapters: Vec<(String, String)> = written
            .iter()
            .filter_map(|a| a.split_once('='))
            // vLLM reads an item with a comma as JSON (`entrypoints/common/cli_args.py:
            // LoRAParserAction`).
            .filter(|(n, p)| !n.is_empty() && !p.is_empty() && !n.contains(',') && !p.contains(','))
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect();
        let rank_help = format!(
            "use one of {}",
            VLLM_LORA_RANKS
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let problem = if !VLLM_LORA_RANKS.contains(&max_rank) {
            Some((
                format!("`max_rank = {max_rank}` is not a rank vLLM serves"),
                rank_help,
            ))
        } else if max_cpu_loras.is_some_and(|c| c < max_loras) {
            Some((
                "`max_cpu_loras` is below `max_loras`".to_string(),
                "vLLM refuses it at start-up (`max_cpu_loras` must be >= `max_loras`): raise it or leave it unset".to_string(),
            ))
        } else if adapters.len() != written.len() {
            Some((
                "an adapter is not `name=path` (without commas)".to_string(),
                "write each as \"name=path\", e.g. \"sql=org/llama-sql-lora\"".to_string(),
            ))
        } else {
            None
        };
        if let Some((message, help)) = problem {
            self.push(
                Diagnostic::new(Code::TypeMismatch, message)
                    .primary(at.file, at.span, "here")
                    .help(help),
            );
            return None;
        }
        Some(LoraSettings {
            adapters,
            max_loras,
            max_rank,
            max_cpu_loras,
        })
    }
}
