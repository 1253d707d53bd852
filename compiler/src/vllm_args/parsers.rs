//! The API server's own checks of the tool-calling and reasoning options in `extra_args`
//! (vLLM 0.33's `entrypoints/common/cli_args.py`), beside the parser's checks in
//! `vllm_args`: auto tool choice without a parser, and parser names its registries lack.

use super::{ArgProblem, VLLM_VERSION};
use crate::diagnostics::Code;

/// The tool-call parsers vLLM 0.33 registers (`tool_parsers/__init__.py:
/// _TOOL_PARSERS_TO_REGISTER`), which `--tool-call-parser` must name.
pub(super) const TOOL_CALL_PARSERS: &[&str] = &[
    "dots",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "deepseek_v4",
    "deepseek_v41",
    "cohere_command3",
    "cohere_command4",
    "ernie45",
    "glm45",
    "glm47",
    "ling3",
    "granite-20b-fc",
    "granite",
    "granite4",
    "hermes",
    "hf",
    "beam",
    "poolside_v1",
    "hunyuan_a13b",
    "hy_v3",
    "hy_v4",
    "internlm",
    "jamba",
    "lfm2",
    "kimi_k2",
    "kimi_k3",
    "k2_horizon",
    "llama3_json",
    "llama4_json",
    "llama4_pythonic",
    "longcat",
    "mimo",
    "minimax_m2",
    "minimax_m3",
    "minicpm5",
    "mistral",
    "olmo3",
    "plamo3",
    "muse",
    "muse_glimmer",
    "musespark1x",
    "openai",
    "phi4_mini_json",
    "pythonic",
    "qwen3_coder",
    "qwen3_json",
    "qwen3_xml",
    "seed_oss",
    "step3",
    "step3p5",
    "step5",
    "inkling",
    "xlam",
    "gigachat3",
    "functiongemma",
    "gemma4",
    "apertus",
];

/// The reasoning parsers vLLM 0.33 registers (`reasoning/__init__.py:
/// _REASONING_PARSERS_TO_REGISTER`), which `--reasoning-parser` must name.
pub(super) const REASONING_PARSERS: &[&str] = &[
    "deepseek_r1",
    "deepseek_v3",
    "deepseek_v4",
    "deepseek_v41",
    "poolside_v1",
    "cohere_command3",
    "cohere_command4",
    "ernie45",
    "gemma4",
    "glm45",
    "glm47",
    "ling3",
    "openai_gptoss",
    "granite",
    "granite_thinking_parser",
    "hf",
    "beam",
    "holo2",
    "hunyuan_a13b",
    "hy_v3",
    "hy_v4",
    "kimi_k2",
    "kimi_k3",
    "k2_horizon",
    "mimo",
    "minicpmv",
    "minimax_m2",
    "minimax_m2_append_think",
    "minimax_m3",
    "mistral",
    "nemotron_v3",
    "olmo3",
    "plamo3",
    "muse",
    "muse_glimmer",
    "musespark1x",
    "qwen3",
    "seed_oss",
    "step3",
    "step3p5",
    "step5",
    "inkling",
];

/// Where option `flag` (dashed; vLLM also reads `_`) stands in `words`, with its value
/// (`--name value` or `--name=value`; `None` for a switch or a missing value).
fn arg_at<'a>(words: &'a [String], flag: &str) -> Option<(usize, Option<&'a str>)> {
    words.iter().enumerate().find_map(|(i, w)| {
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w.as_str(), None),
        };
        let dashed = format!("--{}", name.strip_prefix("--")?.replace('_', "-"));
        (dashed == flag).then(|| {
            let next = words
                .get(i + 1)
                .map(String::as_str)
                .filter(|v| !v.starts_with('-'));
            (i, inline.or(next))
        })
    })
}

/// The API server's own checks of the tool-calling and reasoning options
/// (`entrypoints/common/cli_args.py`): `validate_parsed_serve_args` ("--enable-auto-tool-choice
/// requires --tool-call-parser") and `validate_api_server_args` (a parser name its registry
/// lacks: "invalid tool call parser", "invalid reasoning parser"), which a plugin
/// (`--tool-parser-plugin`, `--reasoning-parser-plugin`) can extend.
pub(super) fn parser_problems(words: &[String]) -> Vec<ArgProblem> {
    let mut out = Vec::new();
    let Some((auto, _)) = arg_at(words, "--enable-auto-tool-choice") else {
        return reasoning_problem(words).into_iter().collect();
    };
    match arg_at(words, "--tool-call-parser") {
        None => out.push(ArgProblem {
            index: auto,
            code: Code::InvalidExtraArg,
            message: "Error: --enable-auto-tool-choice requires --tool-call-parser (entrypoints/common/cli_args.py:validate_parsed_serve_args)".into(),
            help: "add `--tool-call-parser` with the parser of the model's chat format (e.g. `llama3_json`, `hermes`, `qwen3_coder`)".into(),
        }),
        Some((index, Some(name)))
            if !TOOL_CALL_PARSERS.contains(&name)
                && arg_at(words, "--tool-parser-plugin").is_none() =>
        {
            let help = match crate::diagnostics::did_you_mean(name, TOOL_CALL_PARSERS.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("vLLM {VLLM_VERSION}'s parsers: {}", TOOL_CALL_PARSERS.join(", ")),
            };
            out.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("invalid tool call parser: {name} (entrypoints/common/cli_args.py:validate_api_server_args)"),
                help,
            });
        }
        _ => {}
    }
    out.extend(reasoning_problem(words));
    out
}

/// `--reasoning-parser` naming a parser vLLM 0.33 does not register.
fn reasoning_problem(words: &[String]) -> Option<ArgProblem> {
    let (index, name) = arg_at(words, "--reasoning-parser")?;
    let name = name?;
    if REASONING_PARSERS.contains(&name) || arg_at(words, "--reasoning-parser-plugin").is_some() {
        return None;
    }
    let help = match crate::diagnostics::did_you_mean(name, REASONING_PARSERS.iter().copied()) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "vLLM {VLLM_VERSION}'s parsers: {}",
            REASONING_PARSERS.join(", ")
        ),
    };
    Some(ArgProblem {
        index,
        code: Code::InvalidExtraArg,
        message: format!("invalid reasoning parser: {name} (entrypoints/common/cli_args.py:validate_api_server_args)"),
        help,
    })
}

#[cfg(test)]
mod tests {
    use crate::vllm_args::check_extra_args;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    /// The API server's own checks: auto tool choice needs a parser, and a parser must be
    /// one vLLM 0.33 registers (or come from a plugin).
    #[test]
    fn tool_and_reasoning_parsers_are_ones_vllm_registers() {
        let p = check_extra_args(&words(&["--enable-auto-tool-choice"]), false);
        assert!(
            p[0].message.contains("requires --tool-call-parser"),
            "{p:?}"
        );
        let p = check_extra_args(
            &words(&[
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "llama3_jsn",
            ]),
            false,
        );
        assert!(p[0].message.contains("invalid tool call parser"), "{p:?}");
        assert!(p[0].help.contains("llama3_json"), "{p:?}");
        let p = check_extra_args(&words(&["--reasoning-parser=deepseek-r1"]), false);
        assert!(p[0].message.contains("invalid reasoning parser"), "{p:?}");
        let plugin = words(&[
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "mine",
            "--tool-parser-plugin",
            "/plugins/mine.py",
        ]);
        assert_eq!(check_extra_args(&plugin, false), vec![]);
    }
}
