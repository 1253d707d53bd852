//! `dic import-hf`: a Hugging Face `config.json` (and `hf_quant_config.json` when the
//! checkpoint has one) → a `.dist` model definition.
//!
//! Pure: text in, text out. It maps what it understands exactly and refuses the rest
//! with an E0901 diagnostic that names the field — it never guesses. Handled: dense
//! and GQA models, explicit `head_dim`, expert counts under `num_local_experts`,
//! `num_experts` or `n_routed_experts`, MLA ranks, a nested `text_config`
//! (multimodal wrappers, whose encoders add `encoder_parameters`), per-layer kinds
//! (`layer_types`, `full_attention_interval`, `hybrid_override_pattern`,
//! `hybrid_layer_pattern`, `compress_ratios`, `mlp_layer_types`, `moe_layer_freq`,
//! `mlp_only_layers`; NAS models' `block_configs`, with each layer's MLP size in
//! `layer_intermediate`) written as a `layer_pattern`, and quantization in
//! `quantization_config` or a separate `hf_quant_config.json` (FP8 block and per-tensor,
//! MXFP4, AWQ, GPTQ, ModelOpt FP8/NVFP4/mixed precision, compressed-tensors), with the
//! excluded modules mapped per component. Python's `Infinity`/`NaN` are read. Every
//! line of the output says which config field it came from.

//!
//! The reading is in parts, each a module: [`config`] (the JSON and typed access to its
//! numbers), [`dims`] (the scalar sizes), [`layers`] (per-layer kinds and the mixers'
//! dimensions), [`quantization`] (formats per component) and [`render`] (the text).

mod config;
mod dims;
mod layers;
mod nas;
mod quantization;
mod render;

use crate::diagnostics::{Code, Diagnostic};
use crate::program::Model;
use config::Config;
use serde_json::Value;

/// What the caller knows besides the JSON text.
pub struct ImportRequest<'a> {
    pub config: &'a str,
    pub quant_config: Option<&'a str>,
    /// The definition's name.
    pub name: &'a str,
    /// The Hugging Face repository, if known (e.g. from the file name `ORG--NAME_config.json`).
    pub repo: Option<&'a str>,
    /// Shown in the header comment.
    pub source_name: &'a str,
}

fn fail(message: String, help: &str) -> Box<Diagnostic> {
    Box::new(Diagnostic::new(Code::UnsupportedConfig, message).help(help.to_string()))
}

/// Derives a definition name and repository from a file name like
/// `meta-llama--Meta-Llama-3.1-70B_config.json`.
pub fn names_from_file(file_name: &str) -> (String, Option<String>) {
    let stem = file_name
        .trim_end_matches(".json")
        .trim_end_matches("_config")
        .trim_end_matches("config");
    let stem = stem.trim_end_matches(['_', '-', '.']);
    let (repo, model) = match stem.split_once("--") {
        Some((org, model)) => (Some(format!("{org}/{model}")), model.to_string()),
        None => (None, stem.to_string()),
    };
    let mut name: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    let mut name = name.trim_matches('_').to_string();
    if name.is_empty() {
        name = "imported_model".into();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name = format!("m_{name}");
    }
    (name, repo)
}

/// Config keys that count a checkpoint's multi-token-prediction layers (DeepSeek, GLM and
/// MiMo; Qwen3.5/Qwen3-Next; MiniMax).
const MTP_KEYS: [&str; 3] = [
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "num_mtp_modules",
];

/// The `.dist` text of the model, or the reason it cannot be mapped.
pub fn import(req: &ImportRequest<'_>) -> Result<String, Box<Diagnostic>> {
    if !is_identifier(req.name) {
        return Err(fail(
            format!("`{}` cannot name a model", comment_text(req.name)),
            "a name is letters, digits and `_`, starting with a letter or `_` (e.g. `--name my_model`)",
        ));
    }
    let c = Config::parse(req)?;
    let d = dims::read(&c)?;
    let mut m = dims::base_model(&c, &d)?;
    let kinds = layers::read(&c, &d, &mut m)?;
    layers::read_mixer_dims(&c, &d, &kinds, &mut m)?;
    ffn_details(&c, &d, &mut m)?;
    let q = quantization::read_quantization(
        &c.cfg,
        c.quant.as_ref(),
        d.layers,
        d.dtype,
        req.source_name,
    )?;
    quantization::apply(&mut m, &q, d.dtype);
    let mtp = c.first_count(&MTP_KEYS, "mtp_layers")?;
    m.detail.mtp_layers = mtp.map(|m| m.0).unwrap_or(0);
    let mrope = c.mrope_key();
    m.detail.mrope = mrope.is_some();
    let params = crate::architecture::parameters(&m).total;
    dims::check_estimate("parameters", params, "the architecture's sizes", &c)?;
    let text = render::text(&render::Imported {
        req,
        config: &c,
        dims: &d,
        kinds: &kinds,
        quant: &q,
        mtp,
        mrope,
        model: &m,
    });
    refuse_unless_it_checks(text, req.source_name)
}

/// The importer never hands over a definition `dic check` refuses: the reading above
/// names the config field for every bound it knows; anything it missed is refused here
/// with the checker's own message rather than written for `dic check` to find.
fn refuse_unless_it_checks(text: String, source_name: &str) -> Result<String, Box<Diagnostic>> {
    let world = crate::source::MemoryWorld::new().with("imported.dist", &text);
    let problem = match crate::driver::check_file(&world, "imported.dist") {
        Ok(checked) => checked
            .diagnostics
            .into_iter()
            .find(Diagnostic::is_error)
            .map(|d| d.message),
        Err(e) => Some(e.to_string()),
    };
    match problem {
        None => Ok(text),
        Some(why) => Err(fail(
            format!(
                "cannot map `{}`: the model it describes is inconsistent: {why}",
                comment_text(source_name)
            ),
            "check the config; `dic explain E0901` says what import-hf maps",
        )),
    }
}

/// A shared expert's own size, ungated (ReLU²) MLPs, and the multimodal encoder.
fn ffn_details(c: &Config, d: &dims::Dims, m: &mut Model) -> Result<(), Box<Diagnostic>> {
    let det = &mut m.detail;
    if d.ffn.experts > 0 {
        if let Some(s) = d.ffn.shared_size.filter(|s| *s != d.ffn.moe_intermediate) {
            det.shared_expert_intermediate = s;
        }
    }
    let act = c
        .get("mlp_hidden_act")
        .or(c.get("hidden_act"))
        .and_then(Value::as_str);
    det.ungated_mlp = act == Some("relu2");
    if let Some(blocks) = &c.nas {
        let sizes: Vec<u64> = blocks.iter().map(|b| b.intermediate.unwrap_or(0)).collect();
        if sizes.iter().any(|s| *s != d.ffn.intermediate && *s > 0) {
            det.layer_intermediate = sizes;
        }
    }
    det.encoder_parameters = dims::encoder_parameters(c, d.hidden)?;
    Ok(())
}

/// The largest count accepted from a config (the schema's widest model field, `vocab`).
const MAX_CONFIG_INT: u64 = 1 << 26;

/// True for a `.dist` identifier: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Text from a config or a file name made safe for one `//` comment line: control
/// characters (a newline would end the comment and start a line of `.dist`, such as
/// `import "/dev/stdin"`) become spaces, and it is cut at 200 characters.
fn comment_text(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// The `hf_quant_config.json` that goes with a checkpoint's config file named
/// `file_name`: `X_hf_quant_config.json` beside `X_config.json` (the flattened copies in
/// ../shared/models/hf), else `hf_quant_config.json` in the same folder (a checkpoint's
/// own layout).
pub fn quant_config_file_name(file_name: &str) -> String {
    match file_name.strip_suffix("_config.json") {
        Some(stem) => format!("{stem}_hf_quant_config.json"),
        None => "hf_quant_config.json".into(),
    }
}

/// The definition name and model of a checkpoint's `config.json` named `file_name`
/// (`ORG--NAME_config.json`) with its `hf_quant_config.json` when it has one, as
/// `dic import-hf` imports it; the importer's diagnostic when it refuses the config.
pub fn model_from_config(
    file_name: &str,
    config: &str,
    quant_config: Option<&str>,
) -> Result<(String, crate::program::Model), Box<Diagnostic>> {
    let (name, repo) = names_from_file(file_name);
    let text = import(&ImportRequest {
        config,
        quant_config,
        name: &name,
        repo: repo.as_deref(),
        source_name: file_name,
    })?;
    // The importer's output always checks clean; failing here is a bug in it.
    let model = model_from_text(&text).ok_or_else(|| {
        fail(
            format!("the definition imported from `{file_name}` does not check"),
            "a bug in dic's importer: `dic import-hf` on the same file shows its output",
        )
    })?;
    Ok((name, model))
}

/// The checkpoint `hf_id` from a folder of flattened configs (`ORG--NAME_config.json` and,
/// where the checkpoint has one, `ORG--NAME_hf_quant_config.json`, as ../shared/models/hf
/// holds them), imported as `dic import-hf` imports it. `read` returns a file's text by
/// name (the caller does the IO); `None` when the config is absent or the importer refuses
/// it.
pub fn model_from_flat_configs(
    hf_id: &str,
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<crate::program::Model> {
    let file = format!("{}_config.json", hf_id.replace('/', "--"));
    let config = read(&file)?;
    let quant = read(&quant_config_file_name(&file));
    model_from_config(&file, &config, quant.as_deref())
        .ok()
        .map(|(_, model)| model)
}

/// Checks imported `.dist` text and returns its model (the importer's output always
/// checks clean; `None` would be a bug in the importer).
pub fn model_from_text(text: &str) -> Option<crate::program::Model> {
    let world = crate::source::MemoryWorld::new().with("imported.dist", text);
    let checked = crate::driver::check_file(&world, "imported.dist").ok()?;
    if checked.has_errors() {
        return None;
    }
    let model = checked
        .program
        .user_defs_of(crate::schema::Kind::Model)
        .next()
        .and_then(|d| match &d.body {
            crate::program::Body::Model(m) => Some(m.clone()),
            _ => None,
        });
    model
}
