//! The config as `dic import-hf` reads it: JSON with Python's `Infinity`/`NaN`, a
//! multimodal wrapper's `text_config` merged over the top level, the architecture name,
//! and typed access to its numbers, each bounded before any arithmetic.
//!
//! A count is read together with the `.dist` model field it becomes, and must lie in that
//! field's range as the schema states it (one source for each bound): a negative,
//! fractional, non-numeric, zero-where-zero-means-nothing or absurdly large count is
//! refused here, naming the config field, instead of being written for `dic check` to
//! refuse (or, before, mapped silently: `num_key_value_heads: -8` read as absent).

use super::{fail, ImportRequest, MAX_CONFIG_INT};
use crate::diagnostics::Diagnostic;
use crate::schema::{self, Kind};
use serde_json::{Map, Value};

/// A parsed checkpoint config.
pub(super) struct Config<'a> {
    /// The top level: the architecture, vision/audio encoders, a wrapper's dtype.
    pub top: Map<String, Value>,
    /// The language model's fields: `text_config` (when there is one) over the top level.
    pub cfg: Map<String, Value>,
    /// The language model came from `text_config`.
    pub multimodal: bool,
    /// `architectures[0]`, or `unknown`.
    pub arch: String,
    /// The parsed `hf_quant_config.json`, when the checkpoint has one.
    pub quant: Option<Value>,
    /// A NAS model's layers (`block_configs`), as vLLM's DeciLM builds them.
    pub nas: Option<Vec<super::nas::NasBlock>>,
    /// The config's file name, for messages.
    pub source_name: &'a str,
}

impl<'a> Config<'a> {
    /// Parses the request's JSON texts, refusing what is not a JSON object or a count
    /// beyond any model; a NAS model's `block_configs` are read layer by layer.
    pub fn parse(req: &ImportRequest<'a>) -> Result<Config<'a>, Box<Diagnostic>> {
        let root: Value = serde_json::from_str(&lenient_json(req.config)).map_err(|e| {
            fail(
                format!("`{}` is not valid JSON: {e}", req.source_name),
                "pass the model's config.json",
            )
        })?;
        let Value::Object(top) = root else {
            return Err(fail(
                format!("`{}` is not a JSON object", req.source_name),
                "pass the model's config.json",
            ));
        };
        let quant: Option<Value> = match req.quant_config {
            Some(text) => Some(serde_json::from_str(&lenient_json(text)).map_err(|e| {
                fail(
                    format!("hf_quant_config.json is not valid JSON: {e}"),
                    "pass the checkpoint's hf_quant_config.json",
                )
            })?),
            None => None,
        };
        // Multimodal wrappers keep the language model under `text_config`.
        let mut cfg: Map<String, Value> = top.clone();
        let text_config = top.get("text_config").and_then(Value::as_object);
        if let Some(text) = text_config {
            for (k, v) in text {
                cfg.insert(k.clone(), v.clone());
            }
        }
        let arch = top
            .get("architectures")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let mut config = Config {
            multimodal: text_config.is_some(),
            top,
            cfg,
            arch,
            quant,
            nas: None,
            source_name: req.source_name,
        };
        config.refuse_beyond_any_model()?;
        config.nas = super::nas::blocks(&config.cfg, req.source_name)?;
        Ok(config)
    }

    /// Every count a config gives is bounded before any arithmetic: the schema's widest
    /// integer range (a model's sizes), or its token range for the context length.
    fn refuse_beyond_any_model(&self) -> Result<(), Box<Diagnostic>> {
        if let Some((k, v)) = self.cfg.iter().find_map(|(k, v)| {
            let n = v.as_u64()?;
            let limit = if k == "max_position_embeddings" {
                1 << 33
            } else {
                MAX_CONFIG_INT
            };
            (n > limit).then_some((k, n))
        }) {
            return Err(fail(
                format!(
                    "cannot map `{}`: `{k}` = {v} is beyond any model dic describes",
                    self.source_name
                ),
                "check the config: sizes of real models are far smaller",
            ));
        }
        Ok(())
    }

    /// The language model's field `k`.
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.cfg.get(k)
    }

    /// Where the config declares M-RoPE, as vLLM 0.33 finds it
    /// (`transformers_utils/config.py:uses_mrope`): an `mrope_section` (or HunYuan-VL's
    /// `xdrope_section`) list in the language model's `rope_parameters` or `rope_scaling`,
    /// or at its top level, or in an Omni model's thinker's text config.
    pub fn mrope_key(&self) -> Option<String> {
        const SECTIONS: [&str; 2] = ["mrope_section", "xdrope_section"];
        let in_object = |obj: &Map<String, Value>, prefix: &str| {
            for params in ["rope_parameters", "rope_scaling"] {
                if let Some(p) = obj.get(params).and_then(Value::as_object) {
                    if let Some(name) = SECTIONS
                        .iter()
                        .find(|s| p.get(**s).is_some_and(Value::is_array))
                    {
                        return Some(format!("{prefix}{params}.{name}"));
                    }
                }
            }
            SECTIONS
                .iter()
                .find(|s| obj.get(**s).is_some_and(Value::is_array))
                .map(|name| format!("{prefix}{name}"))
        };
        in_object(&self.cfg, "").or_else(|| {
            let thinker = self.top.get("thinker_config")?.as_object()?;
            let text = thinker.get("text_config")?.as_object()?;
            in_object(text, "thinker_config.text_config.")
        })
    }

    /// Whether the language model's config has field `k`.
    pub fn has(&self, k: &str) -> bool {
        self.cfg.contains_key(k)
    }

    /// The count `k`, which becomes the model's `field`: `None` when absent or `null`,
    /// else a whole number in `field`'s range.
    pub fn count(&self, k: &str, field: &str) -> Result<Option<u64>, Box<Diagnostic>> {
        match whole_number(self.cfg.get(k), k, self.source_name)? {
            Some(n) => in_range(n, k, field, self.source_name).map(Some),
            None => Ok(None),
        }
    }

    /// Like [`Config::count`] for a field where the config's 0 means "none" (no MLA
    /// rank, no shared expert, no window): 0 reads as absent.
    pub fn count_or_none(&self, k: &str, field: &str) -> Result<Option<u64>, Box<Diagnostic>> {
        match whole_number(self.cfg.get(k), k, self.source_name)? {
            Some(0) | None => Ok(None),
            Some(n) => in_range(n, k, field, self.source_name).map(Some),
        }
    }

    /// The count `k` (becoming `field`), which dic cannot do without.
    pub fn need(&self, k: &str, field: &str) -> Result<u64, Box<Diagnostic>> {
        self.count(k, field)?.ok_or_else(|| {
            fail(
                format!("cannot map `{}`: it has no integer `{k}`", self.source_name),
                "dic needs the architecture numbers; is this a decoder-only language model's config.json?",
            )
        })
    }

    /// The first of `keys` the config gives, read as [`Config::count`] does, with its key.
    pub fn first_count(
        &self,
        keys: &[&'static str],
        field: &str,
    ) -> Result<Option<(u64, &'static str)>, Box<Diagnostic>> {
        for k in keys {
            if let Some(n) = self.count(k, field)? {
                return Ok(Some((n, k)));
            }
        }
        Ok(None)
    }

    /// A count that becomes no model field itself (a layer interval), bounded by the
    /// widest model field.
    pub fn layer_count(&self, k: &str) -> Result<Option<u64>, Box<Diagnostic>> {
        let n = whole_number(self.cfg.get(k), k, self.source_name)?;
        match n {
            Some(n) if n > MAX_CONFIG_INT => Err(fail(
                format!(
                    "cannot map `{}`: `{k}` = {n} is beyond any model dic describes",
                    self.source_name
                ),
                "check the config: sizes of real models are far smaller",
            )),
            _ => Ok(n),
        }
    }

    /// The checkpoint's dtype as a `.dist` word (bf16 when unsaid).
    pub fn dtype(&self) -> Result<&'static str, Box<Diagnostic>> {
        match self
            .get("torch_dtype")
            .or(self.get("dtype"))
            .or(self.top.get("torch_dtype"))
            .or(self.top.get("dtype"))
            .and_then(Value::as_str)
        {
            Some("bfloat16") | None => Ok("bf16"),
            Some("float16") => Ok("fp16"),
            Some("float32") => Ok("fp32"),
            Some(other) => Err(fail(
                format!("cannot map dtype `{other}` of `{}`", self.source_name),
                "dic knows bfloat16, float16 and float32",
            )),
        }
    }
}

/// `v` (config field `k`) as a whole number: `None` when absent or `null`; a negative,
/// fractional or non-numeric value is refused. A float with no fraction (`4096.0`) is
/// the number it writes. The caller bounds it (by the `.dist` field it becomes).
pub(super) fn whole_number(
    v: Option<&Value>,
    k: &str,
    source_name: &str,
) -> Result<Option<u64>, Box<Diagnostic>> {
    let refuse = |what: String| {
        Err(fail(
            format!("cannot map `{source_name}`: `{k}` = {what}"),
            "check the config: counts and sizes are whole numbers",
        ))
    };
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => {
            let shown: String = other.to_string().chars().take(40).collect();
            return refuse(format!("{} is not a number", super::comment_text(&shown)));
        }
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    if x < 0.0 {
        refuse(format!("{n} is negative"))
    } else if x.fract() != 0.0 || !x.is_finite() {
        refuse(format!("{n} is not a whole number"))
    } else if x > (1u64 << 53) as f64 {
        refuse(format!("{n} is beyond any model dic describes"))
    } else {
        Ok(Some(x as u64))
    }
}

/// `n` (config field `k`) checked against the range of the model's `.dist` field
/// `field`, as the schema states it.
pub(super) fn in_range(
    n: u64,
    k: &str,
    field: &str,
    source_name: &str,
) -> Result<u64, Box<Diagnostic>> {
    let Some(spec) = Kind::Model.schema().field(field) else {
        return Err(fail(
            format!("dic's importer maps `{k}` to `{field}`, which a model does not have"),
            "a bug in dic's importer",
        ));
    };
    match schema::check_number(spec, n as f64) {
        Ok(()) => Ok(n),
        // `head_dim` = 0 → `head_dim` = 0 …: say the value once where the names agree.
        Err(why) if k == field => Err(fail(
            format!("cannot map `{source_name}`: {why}"),
            &format!("check the config: `{k}` becomes the model's `{field}`"),
        )),
        Err(why) => Err(fail(
            format!("cannot map `{source_name}`: `{k}` = {n} → {why}"),
            &format!("check the config: `{k}` becomes the model's `{field}`"),
        )),
    }
}

/// Python's `json` writes `Infinity`, `-Infinity` and `NaN`, which strict JSON refuses.
/// Outside strings they become `null` (dic reads none of the fields that carry them, such
/// as Mamba's `time_step_limit`).
fn lenient_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else {
            let token = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|t| rest.starts_with(t));
            if let Some(t) = token {
                out.push_str("null");
                rest = &rest[t.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-RoPE is found where vLLM 0.33 looks for it (`transformers_utils/config.py:
    /// uses_mrope`): an `mrope_section` list in `rope_parameters` or `rope_scaling`, at the
    /// top level, HunYuan-VL's `xdrope_section`, or an Omni thinker's text config; a plain
    /// or YaRN RoPE config has none. vLLM refuses such a model as a `draft_model`
    /// (docs/vllm-rules.md row 95). The shared Qwen3.5 and Qwen3-VL configs import with it
    /// (tests/import_hf.rs, their snapshots and the stdlib's agreement).
    #[test]
    fn mrope_is_found_where_vllm_looks_for_it() {
        let cases = [
            (
                r#""rope_parameters": {"mrope_section": [11, 11, 10]}"#,
                Some("rope_parameters.mrope_section"),
            ),
            (
                r#""rope_scaling": {"mrope_section": [24, 20, 20]}"#,
                Some("rope_scaling.mrope_section"),
            ),
            (r#""mrope_section": [16, 24, 24]"#, Some("mrope_section")),
            (
                r#""rope_scaling": {"xdrope_section": [16, 24, 24]}"#,
                Some("rope_scaling.xdrope_section"),
            ),
            (
                r#""text_config": {"rope_scaling": {"mrope_section": [1, 2, 3]}}"#,
                Some("rope_scaling.mrope_section"),
            ),
            (
                r#""thinker_config": {"text_config": {"rope_scaling": {"mrope_section": [1]}}}"#,
                Some("thinker_config.text_config.rope_scaling.mrope_section"),
            ),
            (r#""rope_scaling": {"type": "yarn", "factor": 4.0}"#, None),
            (r#""rope_parameters": {"mrope_section": null}"#, None),
        ];
        for (extra, want) in cases {
            let text = format!(r#"{{"num_hidden_layers": 2, {extra}}}"#);
            let req = ImportRequest {
                config: &text,
                quant_config: None,
                name: "m",
                repo: None,
                source_name: "config.json",
            };
            let c = Config::parse(&req).unwrap_or_else(|d| panic!("{extra}: {}", d.message));
            assert_eq!(c.mrope_key().as_deref(), want, "{extra}");
        }
    }
}
