//! `dic estimate`: one point, no file. The model is a stdlib name or a path to a
//! Hugging Face `config.json` (with `hf_quant_config.json` beside it when present).

use dic::exit::{ERRORS, OK, USAGE};
use dic_compiler::analysis::estimate::{run, scenario, to_json, to_table, EstimateRequest};
use dic_compiler::diagnostics::Severity;
use dic_compiler::program::Model;

/// Resolves `--model`: a stdlib model, or a config.json imported on the fly.
fn model(arg: &str) -> Result<(String, Model), String> {
    if let Some(m) = dic_compiler::analysis::catalog::model(arg) {
        return Ok((arg.to_string(), m));
    }
    let path = std::path::Path::new(arg);
    if !path.is_file() {
        let names = dic_compiler::analysis::catalog::model_names();
        let hint = dic_compiler::diagnostics::did_you_mean(arg, names.iter().map(String::as_str))
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        return Err(format!("`{arg}` is neither a stdlib model nor a config.json file{hint}; `dic list models` shows the catalog"));
    }
    let text = dic::disk::read_text(path).map_err(|e| format!("cannot read `{arg}`: {e}"))?;
    let file_name = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or("config.json");
    let quant_path = match file_name.strip_suffix("_config.json") {
        Some(stem) => path.with_file_name(format!("{stem}_hf_quant_config.json")),
        None => path.with_file_name("hf_quant_config.json"),
    };
    let quant = dic::disk::read_text(&quant_path).ok();
    let (name, repo) = dic_compiler::import_hf::names_from_file(file_name);
    let req = dic_compiler::import_hf::ImportRequest {
        config: &text,
        quant_config: quant.as_deref(),
        name: &name,
        repo: repo.as_deref(),
        source_name: file_name,
    };
    let dist =
        dic_compiler::import_hf::import(&req).map_err(|d| format!("{}: {}", d.code, d.message))?;
    let m = dic_compiler::import_hf::model_from_text(&dist);
    m.map(|m| (name, m))
        .ok_or_else(|| format!("`{arg}` could not be turned into a model"))
}

pub fn run_cli(model_arg: &str, req: &EstimateRequest, json: bool) -> u8 {
    let (name, m) = match model(model_arg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let s = match scenario(&name, m, req) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let a = run(&s);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&s, &a)).unwrap_or_default()
        );
    } else {
        print!("{}", to_table(&s, &a));
    }
    if a.findings.iter().any(|f| f.severity == Severity::Error) {
        ERRORS
    } else {
        OK
    }
}
