//! vLLM 0.33's own `vllm serve` options, embedded (`compiler/data/`, projected from the
//! option schema vLLM's argument parser dumps; a test fails when it drifts from
//! `../shared/vllm/serve-schema-0.33.0.json`), and the check of what a user passes
//! through `engine = vllm { extra_args = [...], env = [...] }`: an unknown option gets
//! the closest name, a value the wrong shape is refused as argparse would, and an option
//! or variable dic itself sets is refused with the `.dist` field that sets it, so the
//! memory model and the command line cannot disagree; a token-shaped value (a Hugging
//! Face, OpenAI, AWS or GitHub credential, a JWT, a private key) is refused wherever it
//! sits (E0316), since these values are written in plain text into scripts, manifests
//! and report.json.

mod parsers;
use crate::diagnostics::Code;
use crate::schema::VLLM_OPTIONS;
use crate::secrets::{redact_secrets, secret_shape};
use serde::Deserialize;
use std::sync::OnceLock;

/// The vLLM release the table describes (the version dic's flags target).
pub const VLLM_VERSION: &str = "0.33.0";

/// The table's text, one option per line.
pub const OPTIONS_JSON: &str = include_str!("../data/vllm-serve-options-0.33.0.json");

/// One `vllm serve` option as argparse defines it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ServeOption {
    /// Every spelling argparse accepts (`--tensor-parallel-size`, `-tp`).
    pub flags: Vec<String>,
    /// The `EngineArgs` / frontend field it sets.
    pub dest: String,
    /// `null`: one value; `0`: a switch; `"?"`: optional value; `"+"`: one or more.
    pub nargs: serde_json::Value,
    /// argparse's converter (`int`, `float`, `str`, `human_readable_int`, …).
    #[serde(rename = "type")]
    pub ty: Option<String>,
    pub choices: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
struct Table {
    vllm_version: String,
    options: Vec<ServeOption>,
}

/// Every option of `vllm serve` 0.33 (parsed once per process).
pub fn options() -> &'static [ServeOption] {
    static TABLE: OnceLock<Vec<ServeOption>> = OnceLock::new();
    TABLE.get_or_init(|| match serde_json::from_str::<Table>(OPTIONS_JSON) {
        Ok(t) if t.vllm_version == VLLM_VERSION => t.options,
        // The embedded table is checked by the tests; an unreadable one is a build defect.
        _ => Vec::new(),
    })
}

/// The option spelled `flag` (any of its spellings).
pub fn option(flag: &str) -> Option<&'static ServeOption> {
    options().iter().find(|o| o.flags.iter().any(|f| f == flag))
}

/// Which `.dist` field sets the vLLM field `dest`, when dic writes it itself.
pub fn managed_by(dest: &str) -> Option<String> {
    // The engine block's options: one table (schema.rs) says which flag each becomes.
    for field in VLLM_OPTIONS {
        let Some(flag) = field.vllm else { continue };
        if flag
            .flags()
            .iter()
            .filter_map(|f| option(f))
            .any(|o| o.dest == dest)
        {
            return Some(format!("`engine = vllm {{ {} = … }}`", field.name));
        }
    }
    let by = match dest {
        "model_tag" | "model" => "`model_source` (or the model's `hf`)",
        "served_model_name" => "`served_model_name`",
        "tensor_parallel_size" => "`layout` (tp)",
        "pipeline_parallel_size" => "`layout` (pp)",
        "data_parallel_size" | "data_parallel_size_local" => "`layout` (dp)",
        "enable_expert_parallel" => "`layout` (ep)",
        "decode_context_parallel_size" => "`layout` (dcp)",
        "prefill_context_parallel_size" => "`layout` (pcp)",
        "kv_cache_dtype" => "the model's `kv_cache`",
        "quantization" => "the model's `weights` and `prequantized`",
        "mamba_ssm_cache_dtype" => "the model's `state_dtype`",
        "nnodes" | "node_rank" | "master_addr" | "master_port" | "headless"
        | "distributed_executor_backend" | "data_parallel_address" | "data_parallel_rpc_port"
        | "data_parallel_start_rank" | "data_parallel_backend" | "data_parallel_hybrid_lb"
        | "data_parallel_external_lb" | "api_server_count" => {
            "the launch dic generates from the layout and `engine = vllm { launcher = … }`"
        }
        "api_key" => "`api_key_secret` (a Kubernetes Secret; a key written here would be copied in plain text into every script and manifest)",
        "config" => "the `.dist` file: a vLLM config file would override the flags dic writes, unseen by its checks",
        // The same settings as `--spec-*`, which the engine's `speculative` block writes:
        // passed here they would change memory and TPOT behind dic's prediction.
        "speculative_config" => "`engine = vllm { speculative = { … } }` (its draft's memory and TPOT are predicted)",
        _ => return None,
    };
    Some(by.to_string())
}

/// Environment variables dic sets itself, or that hold secrets, and where they come from.
pub fn env_managed_by(name: &str) -> Option<&'static str> {
    Some(match name {
        "CUDA_VISIBLE_DEVICES" => "the rank placement (each replica's GPUs)",
        "HF_TOKEN" | "HUGGING_FACE_HUB_TOKEN" => {
            "`hf_token_secret` (Kubernetes) or the node's environment (scripts)"
        }
        "HF_HOME" => "`model_cache`",
        "VLLM_API_KEY" => "`api_key_secret`",
        "NCCL_SOCKET_IFNAME" | "GLOO_SOCKET_IFNAME" => "the network profile's `socket_ifname`",
        "VLLM_HOST_IP" | "VLLM_PORT" => "the launch dic generates",
        _ if name.starts_with("DIC_") || name.starts_with("LWS_") => {
            "dic's launch (DIC_*) or the LeaderWorkerSet controller (LWS_*)"
        }
        _ if crate::text_rules::names_a_secret(name) => {
            "a Secret: credentials are referenced, never written into .dist files"
        }
        _ => return None,
    })
}

/// What is wrong with one item of `extra_args` or `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgProblem {
    /// Index of the item in the list.
    pub index: usize,
    /// E0314 (an option or variable dic cannot pass through) or E0316 (a credential).
    pub code: Code,
    /// Never quotes a credential: token-shaped text is cut to its prefix (`hf_…`).
    pub message: String,
    pub help: String,
}

/// Where credentials come from instead of a `.dist` file: the Secret references dic has.
pub const SECRET_HELP: &str = "credentials are referenced, never written into a .dist file: \
    the Hugging Face token through `hf_token_secret` and the API key through \
    `api_key_secret` (Kubernetes Secrets; scripts read HF_TOKEN and VLLM_API_KEY from the \
    node's environment); set any other credential in the nodes' environment or a Secret \
    outside dic";

/// The E0316 problem for item `index` when it holds a credential; `context` leads the
/// message (the caller adds the item's place where it has its own prefix).
fn secret_problem(context: &str, index: usize, item: &str) -> Option<ArgProblem> {
    let shape = secret_shape(item)?;
    Some(ArgProblem {
        index,
        code: Code::InlineSecret,
        message: format!(
            "{context}looks like {} (`{}`), which would be written in plain text into every \
             script, manifest and report.json",
            shape.what, shape.shown
        ),
        help: SECRET_HELP.into(),
    })
}

/// Checks `env` (`NAME=value` items, names already checked as POSIX names): a variable
/// dic sets itself or one named like a credential (E0314), and a value shaped like a
/// credential under any name (E0316).
pub fn check_env(items: &[String]) -> Vec<ArgProblem> {
    let mut problems = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let name = item.split('=').next().unwrap_or_default();
        if let Some(by) = env_managed_by(name) {
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("`env` sets `{name}`, which dic does not take from here"),
                help: format!("it comes from {by}"),
            });
        } else if let Some(p) = env_choice_problem(index, item) {
            problems.push(p);
        } else if let Some(p) = secret_problem(
            &format!("`env` item {} (`{name}`) ", index + 1),
            index,
            item,
        ) {
            problems.push(p);
        }
    }
    problems
}

/// The variables vLLM 0.33 reads through `envs.py:env_with_choices`: name, the values it
/// accepts, and whether case matters. `enable_envs_cache` (engine core and worker start)
/// evaluates every one of them, so a value outside its choices stops `vllm serve` at
/// start-up ("Invalid value '…' for …. Valid options: …."), whether or not it is used.
const ENV_CHOICES: [(&str, &[&str], bool); 15] = [
    (
        "VLLM_FLOAT32_MATMUL_PRECISION",
        &["highest", "high", "medium"],
        false,
    ),
    ("VLLM_GPU_SYNC_CHECK", &["warn", "error"], true),
    (
        "CMAKE_BUILD_TYPE",
        &["Debug", "Release", "RelWithDebInfo"],
        true,
    ),
    ("VLLM_WORKER_MULTIPROC_METHOD", &["spawn", "fork"], true),
    ("VLLM_GDN_DECODE_KERNEL", &["cuda", "triton"], false),
    (
        "VLLM_ROCM_USE_AITER_MOE_SITUV2",
        &["auto", "a4w4", "a8w4", "a16w4", "0", "1"],
        false,
    ),
    (
        "VLLM_ROCM_AITER_MLA_ASM_PADDING",
        &["auto", "gluon", "asm"],
        false,
    ),
    (
        "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
        &["FP", "INT8", "INT6", "INT4", "INT3", "NONE"],
        true,
    ),
    ("VLLM_MARLIN_INPUT_DTYPE", &["int8", "fp8"], true),
    ("VLLM_DEEP_GEMM_WARMUP", &["skip", "full", "relax"], true),
    (
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
        &["auto", "trtllm", "mnnvl"],
        true,
    ),
    (
        "VLLM_KV_CACHE_LAYOUT",
        &[
            "LBNHC", "LBHNC", "LHBNC", "NHD", "HND", "BLHNC", "BLNHC", "BHLNC",
        ],
        true,
    ),
    ("VLLM_SSM_CONV_STATE_LAYOUT", &["SD", "DS"], true),
    (
        "VLLM_COMPILE_CACHE_SAVE_FORMAT",
        &["binary", "unpacked"],
        true,
    ),
    (
        "VLLM_XPU_INC_WNA16_BACKEND",
        &["auto", "ark", "w4a16", "w4a8"],
        true,
    ),
];

/// `env` item `NAME=value` whose value vLLM's `env_with_choices` refuses.
fn env_choice_problem(index: usize, item: &str) -> Option<ArgProblem> {
    let (name, value) = item.split_once('=')?;
    let (_, choices, case_sensitive) = ENV_CHOICES.iter().find(|(n, _, _)| *n == name)?;
    let accepted = choices.iter().any(|c| {
        if *case_sensitive {
            *c == value
        } else {
            c.eq_ignore_ascii_case(value)
        }
    });
    (!accepted).then(|| ArgProblem {
        index,
        code: Code::InvalidExtraArg,
        message: format!(
            "Invalid value '{value}' for {name}. Valid options: {}. (vLLM reads every such variable as its engine starts: `envs.py:env_with_choices`)",
            choices.join(", ")
        ),
        help: format!(
            "set `{name}` to one of {}{}",
            choices.join(", "),
            if *case_sensitive { " (case matters)" } else { "" }
        ),
    })
}

/// An option word split at its first `.`: `--compilation-config.cudagraph_mode` is
/// `--compilation-config` and the key path `cudagraph_mode` (vLLM's parser sets one key of
/// a JSON option that way, in the `-cc.` spelling too).
pub fn split_json_key(name: &str) -> (&str, Option<&str>) {
    match name.split_once('.') {
        Some((base, key)) if name.starts_with('-') => (base, Some(key)),
        _ => (name, None),
    }
}

/// Keys of vLLM's `--compilation-config` that dic sets itself, and the `.dist` field.
const COMPILATION_KEYS: [(&str, &str); 1] = [("cudagraph_mode", "cudagraph_mode")];

/// Checks `extra_args` (one argv word per item, `--flag value` or `--flag=value`) the
/// way vLLM 0.33's parser would, plus dic's own rule: no option dic sets. `dic_json_keys`
/// says whether dic's own flags set keys of `--compilation-config` one by one
/// (`--compilation-config.cudagraph_mode`): vLLM's parser then gathers every such key
/// into one JSON it places last, which replaces a whole `--compilation-config JSON`
/// written here, so that form is refused.
pub fn check_extra_args(words: &[String], dic_json_keys: bool) -> Vec<ArgProblem> {
    let mut problems: Vec<ArgProblem> = words
        .iter()
        .enumerate()
        .filter_map(|(index, word)| secret_problem("", index, word))
        .collect();
    for mut p in option_problems(words, dic_json_keys)
        .into_iter()
        .chain(parsers::parser_problems(words))
    {
        p.message = redact_secrets(&p.message);
        p.help = redact_secrets(&p.help);
        problems.push(p);
    }
    problems.sort_by_key(|p| p.index);
    problems
}

/// What vLLM's parser, or dic's rule against options it sets, finds wrong in `words`.
fn option_problems(words: &[String], dic_json_keys: bool) -> Vec<ArgProblem> {
    let mut problems = Vec::new();
    let is_option = |w: &str| w.starts_with('-') && w.len() > 1 && w.parse::<f64>().is_err();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let index = i;
        i += 1;
        if !is_option(word) {
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("`{word}` is not an option: `vllm serve` takes its model from dic"),
                help: "extra_args holds options (`--name` and its value as separate items, or `--name=value`)".into(),
            });
            continue;
        }
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (word.as_str(), None),
        };
        // `--compilation-config.mode 3` (or `-cc.mode=3`) sets one key of a JSON option.
        let (base, json_key) = split_json_key(name);
        // vLLM accepts `_` for `-` in long options; dic emits the dashed spelling.
        let canonical = if let Some(rest) = base.strip_prefix("--") {
            format!("--{}", rest.replace('_', "-"))
        } else {
            base.to_string()
        };
        let Some(opt) = option(&canonical) else {
            let all = options()
                .iter()
                .flat_map(|o| o.flags.iter().map(String::as_str));
            let help = match crate::diagnostics::did_you_mean(&canonical, all) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("`vllm serve --help=all` lists vLLM {VLLM_VERSION}'s options"),
            };
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("vLLM {VLLM_VERSION} has no option `{name}`"),
                help,
            });
            skip_values(words, &mut i, inline.is_some(), &is_option);
            continue;
        };
        if let Some(by) = managed_by(&opt.dest) {
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("dic sets `{}` itself", opt.flags[0]),
                help: format!("set it through {by}"),
            });
            skip_values(words, &mut i, inline.is_some(), &is_option);
            continue;
        }
        let compilation = opt.dest == "compilation_config";
        if let Some(field) = json_key
            .filter(|_| compilation)
            .and_then(|k| compilation_key_field(k.split('.').next().unwrap_or(k)))
        {
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("dic sets `{base}.{field}` itself"),
                help: format!("set it through `engine = vllm {{ {field} = … }}`"),
            });
            skip_values(words, &mut i, inline.is_some(), &is_option);
            continue;
        }
        let nargs = &opt.nargs;
        if *nargs == serde_json::json!(0) {
            if inline.is_some() {
                problems.push(ArgProblem {
                    index,
                    code: Code::InvalidExtraArg,
                    message: format!("`{name}` is a switch and takes no value"),
                    help: format!("write `{name}` alone"),
                });
            }
            continue;
        }
        let mut values: Vec<&str> = inline.into_iter().collect();
        let many = *nargs == serde_json::json!("+");
        while inline.is_none() && (values.is_empty() || many) {
            match words.get(i) {
                Some(v) if !is_option(v) => {
                    values.push(v);
                    i += 1;
                }
                _ => break,
            }
        }
        if values.is_empty() && *nargs != serde_json::json!("?") {
            problems.push(ArgProblem {
                index,
                code: Code::InvalidExtraArg,
                message: format!("`{name}` expects a value"),
                help: format!("add its value as the next item: `\"{name}\", \"…\"`"),
            });
        }
        for v in values {
            if compilation && json_key.is_none() {
                if let Some(p) = whole_compilation_config(index, name, v, dic_json_keys) {
                    problems.push(p);
                    continue;
                }
            }
            if let Some(why) = value_problem(opt, v) {
                problems.push(ArgProblem {
                    index,
                    code: Code::InvalidExtraArg,
                    message: format!("`{name} {v}`: {why}"),
                    help: "vLLM's parser would refuse it at startup".into(),
                });
            }
        }
    }
    problems
}

/// The `.dist` field that sets `--compilation-config` key `key`, when dic sets it.
fn compilation_key_field(key: &str) -> Option<&'static str> {
    COMPILATION_KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, field)| *field)
}

/// What is wrong with a whole `--compilation-config JSON` (item `index`, spelled `name`):
/// not JSON (vLLM's parser refuses it), a key dic sets, or any JSON at all where dic
/// writes keys one by one (vLLM would replace it with those).
fn whole_compilation_config(
    index: usize,
    name: &str,
    v: &str,
    dic_json_keys: bool,
) -> Option<ArgProblem> {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(v) else {
        return Some(ArgProblem {
            index,
            code: Code::InvalidExtraArg,
            message: format!("`{name}` takes a JSON object; `{v}` is not JSON"),
            help: format!("write it as `{name}.KEY=VALUE` items, or as a JSON object"),
        });
    };
    if let Some(field) = json
        .as_object()
        .and_then(|o| o.keys().find_map(|k| compilation_key_field(k)))
    {
        return Some(ArgProblem {
            index,
            code: Code::InvalidExtraArg,
            message: format!("`{name}` sets `{field}`, which dic sets itself"),
            help: format!("set it through `engine = vllm {{ {field} = … }}`"),
        });
    }
    dic_json_keys.then(|| ArgProblem {
        index,
        code: Code::InvalidExtraArg,
        message: format!(
            "a whole `{name}` JSON would be dropped: dic sets `cudagraph_mode` as \
             `--compilation-config.cudagraph_mode`, and vLLM's parser gathers such keys into \
             one JSON that replaces this one"
        ),
        help: "write each key as its own item, `--compilation-config.KEY=VALUE`; vLLM merges \
               those with dic's"
            .into(),
    })
}

fn skip_values(words: &[String], i: &mut usize, inline: bool, is_option: &dyn Fn(&str) -> bool) {
    if inline {
        return;
    }
    while words.get(*i).is_some_and(|w| !is_option(w)) {
        *i += 1;
    }
}

/// Why argparse would refuse `v` for `opt`, if it would.
fn value_problem(opt: &ServeOption, v: &str) -> Option<String> {
    let ok = match opt.ty.as_deref() {
        Some("int") => v.parse::<i64>().is_ok(),
        Some("float") => v.parse::<f64>().is_ok(),
        Some("human_readable_int") | Some("human_readable_int_or_auto") => {
            human_int(v)
                || (opt.ty.as_deref() == Some("human_readable_int_or_auto")
                    && (v == "auto" || v == "-1"))
        }
        _ => true,
    };
    if !ok {
        return Some(format!(
            "not a valid `{}`",
            opt.ty.as_deref().unwrap_or("value")
        ));
    }
    let choices = opt.choices.as_ref()?;
    let allowed = choices.iter().any(|c| {
        c.as_str() == Some(v) || serde_json::from_str::<serde_json::Value>(v).is_ok_and(|x| &x == c)
    });
    (!allowed).then(|| {
        format!(
            "not one of {}",
            choices
                .iter()
                .map(|c| c
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| c.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// vLLM's `human_readable_int`: digits, optionally with a decimal (`k`, `m`, `g`, `t`,
/// lower case) or binary (`K`, `M`, `G`, `T`, whole numbers only) suffix.
fn human_int(v: &str) -> bool {
    let (num, suffix) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&v[..i], Some(c)),
        _ => (v, None),
    };
    match suffix {
        None => num.parse::<i64>().is_ok(),
        Some('k' | 'm' | 'g' | 't') => num.parse::<f64>().is_ok_and(|x| x.is_finite()),
        Some('K' | 'M' | 'G' | 'T') => num.parse::<u64>().is_ok(),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::VllmFlag;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_table_loads_and_knows_vllms_options() {
        assert!(options().len() > 300, "{}", options().len());
        assert_eq!(
            option("-tp").map(|o| o.dest.as_str()),
            Some("tensor_parallel_size")
        );
        for f in VLLM_OPTIONS
            .iter()
            .filter_map(|f| f.vllm)
            .flat_map(VllmFlag::flags)
        {
            let (f, _) = split_json_key(f);
            assert!(
                option(f).is_some(),
                "{f} is not a vLLM {VLLM_VERSION} option"
            );
        }
    }

    #[test]
    fn valid_extra_args_pass() {
        let ok = words(&[
            "--trust-remote-code",
            "--reasoning-parser",
            "deepseek_r1",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--lora-modules",
            "a=org/a",
            "b=org/b",
            "--max-lora-rank=64",
            "--compilation-config.mode",
            "3",
        ]);
        assert_eq!(check_extra_args(&ok, false), vec![]);
    }

    #[test]
    fn unknown_managed_and_malformed_args_are_refused() {
        let p = check_extra_args(&words(&["--trust-remote-cod"]), false);
        assert_eq!(p.len(), 1);
        assert!(p[0].help.contains("--trust-remote-code"), "{p:?}");
        let p = check_extra_args(&words(&["-tp", "8"]), false);
        assert!(
            p[0].message
                .contains("sets `--tensor-parallel-size` itself"),
            "{p:?}"
        );
        assert!(p[0].help.contains("`layout` (tp)"), "{p:?}");
        let p = check_extra_args(&words(&["--max_model_len", "8192"]), false);
        assert!(p[0].help.contains("max_model_len"), "{p:?}");
        let p = check_extra_args(&words(&["--api-key", "sk-123"]), false);
        assert!(p[0].help.contains("api_key_secret"), "{p:?}");
        assert_eq!(p.len(), 1, "the key is skipped with its option: {p:?}");
        let p = check_extra_args(&words(&["--max-lora-rank", "big"]), false);
        assert!(p[0].message.contains("not a valid `int`"), "{p:?}");
        let p = check_extra_args(&words(&["--trust-remote-code=yes"]), false);
        assert!(p[0].message.contains("takes no value"), "{p:?}");
        let p = check_extra_args(&words(&["--reasoning-parser"]), false);
        assert!(p[0].message.contains("expects a value"), "{p:?}");
        let p = check_extra_args(&words(&["--dtype", "bf16"]), false);
        assert!(p[0].message.contains("not one of"), "{p:?}");
        let p = check_extra_args(&words(&["meta-llama/x"]), false);
        assert!(p[0].message.contains("not an option"), "{p:?}");
        // Speculative decoding goes through the engine's `speculative` block, in either
        // spelling vLLM accepts.
        for flag in ["--speculative-config", "--spec-method"] {
            let p = check_extra_args(&words(&[flag, "x"]), false);
            assert!(p[0].help.contains("speculative ="), "{flag}: {p:?}");
        }
    }

    /// `--compilation-config` keys: one by one in either spelling, or a whole JSON; the
    /// key dic sets (`cudagraph_mode`) is refused in both forms, and a whole JSON is
    /// refused where dic writes its key one by one (vLLM would drop the JSON).
    #[test]
    fn compilation_config_keys_dic_sets_are_refused_in_either_form() {
        let fused = r#"{"pass_config": {"fuse_allreduce_rms": true}}"#;
        for ok in [
            words(&["-cc.mode=3"]),
            words(&[
                "--compilation-config.pass_config.fuse_allreduce_rms",
                "true",
            ]),
            words(&["--compilation-config", fused]),
            words(&["-cc", fused]),
        ] {
            assert_eq!(check_extra_args(&ok, false), vec![], "{ok:?}");
        }
        let p = check_extra_args(&words(&["--compilation-config.cudagraph_mode=FULL"]), false);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].help.contains("cudagraph_mode = …"), "{p:?}");
        let p = check_extra_args(&words(&["-cc", r#"{"cudagraph_mode": "NONE"}"#]), false);
        assert!(p[0].message.contains("sets `cudagraph_mode`"), "{p:?}");
        // dic writes `--compilation-config.cudagraph_mode`: a whole JSON would be replaced
        let p = check_extra_args(&words(&["--compilation-config", fused]), true);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].help.contains("--compilation-config.KEY=VALUE"),
            "{p:?}"
        );
        let keys = words(&["--compilation-config.pass_config.fuse_allreduce_rms=true"]);
        assert_eq!(check_extra_args(&keys, true), vec![]);
        let p = check_extra_args(&words(&["--compilation-config", "{mode: 3"]), false);
        assert!(p[0].message.contains("is not JSON"), "{p:?}");
    }

    #[test]
    fn managed_env_and_secrets_are_named() {
        assert!(env_managed_by("CUDA_VISIBLE_DEVICES").is_some());
        assert!(env_managed_by("VLLM_API_KEY").is_some());
        assert!(env_managed_by("OPENAI_API_KEY").is_some());
        assert_eq!(env_managed_by("VLLM_ATTENTION_BACKEND"), None);
    }

    /// Every token shape is refused (E0316) in `extra_args`, alone, after `=` or inside a
    /// JSON value, and in `env` under an innocuous name; no message quotes the token.
    #[test]
    fn token_shaped_values_are_refused_without_being_quoted() {
        for (token, what) in crate::secrets::FAKE_TOKENS {
            let tail = &token[token.len() - 8..];
            for args in [
                words(&["--hf-overrides", &format!(r#"{{"auth": "{token}"}}"#)]),
                words(&[&format!("--lora-modules=a={token}")]),
                words(&[token]),
            ] {
                let p = check_extra_args(&args, false);
                let secret: Vec<_> = p.iter().filter(|p| p.code == Code::InlineSecret).collect();
                assert_eq!(secret.len(), 1, "{args:?}: {p:?}");
                assert!(secret[0].message.contains(what), "{p:?}");
                assert!(secret[0].help.contains("hf_token_secret"), "{p:?}");
                for p in &p {
                    assert!(!p.message.contains(tail) && !p.help.contains(tail), "{p:?}");
                }
            }
            let p = check_env(&words(&[
                "VLLM_ATTENTION_BACKEND=FLASHINFER",
                &format!("DOWNLOAD_AUTH={token}"),
            ]));
            assert_eq!(p.len(), 1, "{token}: {p:?}");
            assert_eq!((p[0].index, p[0].code), (1, Code::InlineSecret));
            assert!(p[0].message.contains("DOWNLOAD_AUTH"), "{p:?}");
            assert!(!p[0].message.contains(tail), "{p:?}");
        }
    }

    /// Paths, model ids, numbers and JSON are passed through untouched.
    #[test]
    fn ordinary_values_are_not_taken_for_credentials() {
        let args = words(&[
            "--tokenizer",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--download-dir",
            "/mnt/models/hf_cache",
            "--max-lora-rank",
            "64",
            "--hf-overrides",
            r#"{"rope_scaling": {"type": "yarn", "factor": 4.0}}"#,
        ]);
        assert_eq!(check_extra_args(&args, false), vec![]);
        let env = words(&[
            "VLLM_ATTENTION_BACKEND=FLASHINFER",
            "HF_HUB_ENABLE_HF_TRANSFER=1",
            "NCCL_IB_HCA=mlx5_0,mlx5_1",
            "VLLM_CONFIG_ROOT=/etc/vllm",
        ]);
        assert_eq!(check_env(&env), vec![]);
        let p = check_env(&words(&["HF_TOKEN=hf_Xk3v9QmZr7TbLw2NcYp5HsDfJg8AeUo1Ri"]));
        assert_eq!(p.len(), 1, "one diagnostic, for the name: {p:?}");
        assert_eq!(p[0].code, Code::InvalidExtraArg);
    }
}
