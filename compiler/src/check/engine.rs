//! A deployment's `engine = vllm { … }` block → the typed [`VllmOptions`], read once
//! here, and the block's own rules (pass-through options, the speculative method's
//! inputs).
//!
//! Each written option is matched by its [`EngineOption`] (the schema's engine table
//! names them), exhaustively: an option added to the table is read here or the build
//! fails. Options left unset stay `None`; vLLM's defaults are filled by the analysis
//! (`analysis::scenario::engine_settings`), which knows the GPU and the model.

use super::reader::{self, Reader};
use super::*;
use crate::program::SpeculativeOptions;
use crate::schema::{dic_defaults, vllm_defaults, EngineOption};

/// The typed options of an engine block.
pub(super) fn vllm_options(opts: &BTreeMap<String, FieldValue>) -> VllmOptions {
    let mut options = VllmOptions::default();
    for (name, fv) in opts {
        if let Some(option) = EngineOption::named(name) {
            set_option(&mut options, option, &fv.value);
        }
    }
    options
}

/// Sets `option` of `o` from its checked value.
fn set_option(o: &mut VllmOptions, option: EngineOption, v: &Value) {
    use reader::{boolean, number, uint, word};
    match option {
        EngineOption::Port => o.port = uint(v),
        EngineOption::GpuMemoryUtilization => o.gpu_memory_utilization = number(v),
        EngineOption::MaxModelLen => o.max_model_len = number(v),
        EngineOption::MaxNumSeqs => o.max_num_seqs = uint(v),
        EngineOption::MaxNumBatchedTokens => o.max_num_batched_tokens = number(v),
        EngineOption::BlockSize => o.block_size = uint(v),
        EngineOption::EnforceEager => o.enforce_eager = boolean(v).unwrap_or(false),
        EngineOption::CudagraphMode => o.cudagraph_mode = word(v),
        EngineOption::KvCacheMemory => o.kv_cache_memory = number(v),
        EngineOption::EnablePrefixCaching => o.enable_prefix_caching = boolean(v),
        EngineOption::Speculative => {
            o.speculative = reader::block(v).map(|b| speculative_options(&Reader(b)))
        }
        EngineOption::CpuOffload => o.cpu_offload = number(v),
        EngineOption::All2allBackend => o.all2all_backend = word(v),
        EngineOption::Dbo => o.dbo = boolean(v).unwrap_or(false),
        EngineOption::Launcher => o.launcher = word(v),
        EngineOption::ExtraArgs => o.extra_args = reader::strings(v),
        EngineOption::Env => o.env = reader::pairs(v),
        EngineOption::ActivationMemory => o.activation_memory = number(v),
        EngineOption::NonTorchMemory => o.non_torch_memory = number(v),
        EngineOption::CudaGraphMemory => o.cuda_graph_memory = number(v),
    }
}

/// `speculative = { … }` with its defaults filled.
fn speculative_options(s: &Reader<'_>) -> SpeculativeOptions {
    let method = s.word("method").unwrap_or_else(|| "eagle3".into());
    SpeculativeOptions {
        acceptance: s
            .num("acceptance")
            .unwrap_or_else(|| dic_defaults::spec_acceptance(&method)),
        source: s.string("source"),
        draft: s.reference("draft"),
        tokens: s.uint("tokens").unwrap_or(vllm_defaults::SPEC_TOKENS),
        method,
    }
}

impl Checker<'_, '_> {
    /// The engine block's options, typed, and whether its rules hold.
    pub(super) fn engine_options(
        &mut self,
        opts: &BTreeMap<String, FieldValue>,
    ) -> (VllmOptions, bool) {
        let passthrough_ok = self.passthrough(opts);
        let speculative_ok = self.speculative(opts);
        (vllm_options(opts), passthrough_ok && speculative_ok)
    }

    /// The engine's `speculative` block: each method's own input is there, and only it.
    /// True when it is clean (or absent).
    fn speculative(&mut self, opts: &BTreeMap<String, FieldValue>) -> bool {
        let Some(fv) = opts.get(EngineOption::Speculative.name()) else {
            return true;
        };
        let Some(b) = reader::block(&fv.value) else {
            return true;
        };
        let s = Reader(b);
        let method = s.word("method").unwrap_or_default();
        let (has_source, has_draft) =
            (s.string("source").is_some(), s.reference("draft").is_some());
        let problem = match method.as_str() {
            "eagle" | "eagle3" if !has_source => Some((
                format!("`method = {method}` needs the head's checkpoint"),
                "add `source = \"…\"`, the EAGLE head trained for this model (e.g. \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\")".to_string(),
            )),
            "draft_model" if !has_draft => Some((
                "`method = draft_model` needs the draft model".to_string(),
                "add `draft = <model>`, a smaller model with the same tokenizer (e.g. `draft = llama_3_2_1b` defined from its config)".to_string(),
            )),
            "mtp" | "ngram" if has_source || has_draft => Some((
                format!("`method = {method}` takes no `source` or `draft`"),
                if method == "mtp" {
                    "MTP drafts with the checkpoint's own `mtp_layers`: remove `source`/`draft`".to_string()
                } else {
                    "n-gram drafting looks tokens up in the prompt: remove `source`/`draft`".to_string()
                },
            )),
            "eagle" | "eagle3" if has_draft => Some((
                format!("`method = {method}` takes `source`, not `draft`"),
                "`draft` is for `method = draft_model`".to_string(),
            )),
            "draft_model" if has_source => Some((
                "`method = draft_model` takes `draft`, not `source`".to_string(),
                "the draft model's `hf` is what vLLM loads".to_string(),
            )),
            _ => None,
        };
        let Some((message, help)) = problem else {
            return true;
        };
        self.push(
            Diagnostic::new(Code::MissingField, message)
                .primary(fv.at.file, fv.at.span, "speculative decoding")
                .help(help),
        );
        false
    }

    /// The engine block's pass-through options, checked against vLLM's own option table
    /// and dic's own flags and variables (E0314). True when they are clean.
    fn passthrough(&mut self, opts: &BTreeMap<String, FieldValue>) -> bool {
        let mut ok = true;
        if let Some(fv) = opts.get(EngineOption::ExtraArgs.name()) {
            for p in crate::vllm_args::check_extra_args(
                &reader::strings(&fv.value),
                opts.contains_key(EngineOption::CudagraphMode.name()),
            ) {
                self.push(
                    Diagnostic::new(
                        p.code,
                        format!("`extra_args` item {}: {}", p.index + 1, p.message),
                    )
                    .primary(fv.at.file, fv.at.span, "passed to `vllm serve`")
                    .help(p.help),
                );
                ok = false;
            }
        }
        if let Some(fv) = opts.get(EngineOption::Env.name()) {
            for p in crate::vllm_args::check_env(&reader::strings(&fv.value)) {
                self.push(
                    Diagnostic::new(p.code, p.message)
                        .primary(fv.at.file, fv.at.span, "the vLLM processes' environment")
                        .help(p.help),
                );
                ok = false;
            }
        }
        ok
    }
}
