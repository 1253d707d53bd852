//! `dic`: the command line. Parses arguments, wraps the IO-free compiler core with disk
//! IO, renders diagnostics, and maps every outcome to an exit code:
//! 0 success (warnings allowed), 1 errors found (or `--check` drift), 2 usage or IO error.

mod cli_compile;
mod cli_estimate;
mod cli_fmt;
mod cli_init;
mod cli_list;
mod cli_observe;
mod cli_plan;
mod cli_run;

use clap::{Parser, Subcommand};
use dic::disk::DiskWorld;
use dic::exit::{ERRORS as EXIT_ERRORS, OK as EXIT_OK, USAGE as EXIT_USAGE};
use dic::render;
use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "dic",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("DIC_COMMIT"), ")"),
    about = "A compiler for distributed LLM inference deployments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

use dic::Format;

#[derive(Subcommand)]
enum Command {
    /// Check .dist files and print diagnostics.
    Check {
        /// The files to check; `-` reads one from standard input (its imports resolve
        /// from the current folder).
        #[arg(required = true)]
        files: Vec<String>,
        /// `human` (terminal, on stderr) or `json` (on stdout).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// The same as `--format json`.
        #[arg(long)]
        json: bool,
    },
    /// Compile deployments to vLLM launch configs and Kubernetes manifests.
    Compile {
        /// The .dist file whose deployments to compile; `-` reads it from standard input
        /// (its imports resolve from the current folder).
        file: String,
        /// Output folder: one subfolder per deployment.
        #[arg(long)]
        out: String,
        /// Write nothing; exit 1 with a diff if OUT differs from what would be generated.
        #[arg(long)]
        check: bool,
        /// `json`: what was written (or would be, with `--check`) and the diagnostics, on
        /// stdout.
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Search layouts: the chosen one, ranked alternatives, rejected families, the scaling curve.
    Plan {
        /// The .dist file whose deployments to plan; `-` reads it from standard input.
        file: String,
        /// Print the search as JSON (the same as `--format json`).
        #[arg(long)]
        json: bool,
        /// `human` or `json`.
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// How many alternatives, and rejected families, to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// What-if: plan each deployment on these GPU types instead (stdlib names, comma
        /// separated: `h100_sxm,h200_sxm,b200,mi300x`), ranked by $ per million tokens.
        #[arg(long, value_name = "GPU,GPU,…")]
        gpus: Option<String>,
    },
    /// Explain a diagnostic code (`dic explain E0201`); without a code, list them all.
    Explain {
        /// A code such as `E0201` (case-insensitive).
        code: Option<String>,
    },
    /// Format .dist files in place (or check that they are formatted).
    Fmt {
        /// The .dist files to format.
        #[arg(required = true)]
        files: Vec<String>,
        /// Write nothing; exit 1 if a file is not formatted.
        #[arg(long)]
        check: bool,
    },
    /// Print a .dist model definition from a Hugging Face config.json.
    ImportHf {
        /// A Hugging Face `config.json` (its `hf_quant_config.json` beside it is read too).
        config: String,
        /// Name of the definition (default: from the file name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Predict memory, latency and throughput for one model on one GPU type, no file needed.
    Estimate(Box<EstimateArgs>),
    /// Measure a running deployment (vLLM's /metrics, Prometheus, or saved files) against
    /// its .dist: KV capacity, workload drift, SLOs at the observed load, acceptance and
    /// prefix hits, preemptions; `--write` records the measured workload, `--calibrate` fits
    /// the model to the engines.
    Observe(Box<cli_observe::ObserveArgs>),
    /// Run a compiled deployment's communication (`nccl/plan.toml`) and measure the fabric.
    Run(Box<cli_run::RunArgs>),
    /// The language server, over stdio (editors start it; see editors/vscode).
    Lsp,
    /// List the stdlib catalog.
    List {
        /// Which part of the catalog.
        what: cli_list::Catalog,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a starter .dist file from a GPU name, a node count and a stdlib model.
    Init {
        /// The GPU, as `nvidia-smi` prints it (`"NVIDIA H100 80GB HBM3"`) or a stdlib name.
        #[arg(long)]
        gpu: String,
        /// How many nodes.
        #[arg(long, default_value_t = 1)]
        nodes: u64,
        /// GPUs per node.
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u64,
        /// A stdlib model (`dic list models`).
        #[arg(long)]
        model: String,
        /// Requests per second the workload offers (default 4, lowered to what the
        /// hardware serves when it serves less).
        #[arg(long)]
        rate: Option<f64>,
        /// The file to write (never overwritten).
        #[arg(long, default_value = "deployment.dist")]
        out: String,
    },
    /// Print a shell completion script (`dic completions bash > /etc/bash_completion.d/dic`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// FFI: signal(2), which std does not wrap.
#[cfg(unix)]
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, which turns `dic plan | head` into a panic on the next print;
    // Unix tools end quietly instead.
    #[cfg(unix)]
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    ExitCode::from(match cli.command {
        Command::Check {
            files,
            format,
            json,
        } => check(
            &files,
            if Format::json(format, json) {
                Format::Json
            } else {
                Format::Human
            },
        ),
        Command::Init {
            gpu,
            nodes,
            gpus_per_node,
            model,
            rate,
            out,
        } => cli_init::run(
            &cli_init::InitArgs {
                gpu: &gpu,
                nodes,
                gpus_per_node,
                model: &model,
                rate: rate.unwrap_or(4.0),
                rate_given: rate.is_some(),
                out: &out,
            },
            color(),
            width(),
        ),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut completable(), "dic", &mut std::io::stdout());
            EXIT_OK
        }
        Command::Explain { code } => explain(code.as_deref()),
        Command::Plan {
            file,
            json,
            format,
            top,
            gpus,
        } => cli_plan::run(
            &file,
            Format::json(format, json),
            top,
            gpus.as_deref(),
            color(),
            width(),
        ),
        Command::Compile {
            file,
            out,
            check,
            format,
        } => cli_compile::run(
            &file,
            &out,
            check,
            Format::json(format, false),
            color(),
            width(),
        ),
        Command::Fmt { files, check } => cli_fmt::run(&files, check),
        Command::ImportHf { config, name } => import_hf(&config, name.as_deref()),
        Command::List { what, json } => cli_list::run(what, json),
        Command::Estimate(a) => estimate(a),
        Command::Run(a) => cli_run::run(*a),
        Command::Observe(a) => cli_observe::run(&a, color(), width()),
        Command::Lsp => match dic_lsp::run_stdio(Box::new(DiskWorld)) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("error: dic lsp: {e}");
                EXIT_ERRORS
            }
        },
    })
}

/// The command line as the completion scripts see it: `dic init --model <TAB>` offers the
/// stdlib models, `--gpu` the stdlib GPUs, `dic explain <TAB>` every code. Only the
/// scripts get these lists; parsing keeps its own messages for unknown names.
fn completable() -> clap::Command {
    use clap::builder::PossibleValuesParser;
    use clap::CommandFactory;
    use dic_compiler::schema::Kind;
    let stdlib = driver::check_stdlib();
    // clap's possible values are `&'static str` (its `string` feature is off): the names
    // live as long as this one-shot command that prints the script and exits.
    let names = |kind: Kind| -> Vec<&'static str> {
        stdlib
            .program
            .defs
            .iter()
            .flatten()
            .filter(|d| d.kind == kind)
            .map(|d| &*Box::leak(d.name.clone().into_boxed_str()))
            .collect()
    };
    let (models, gpus) = (names(Kind::Model), names(Kind::Gpu));
    let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    Cli::command()
        .mut_subcommand("init", |c| {
            c.mut_arg("model", |a| {
                a.value_parser(PossibleValuesParser::new(models.clone()))
            })
            .mut_arg("gpu", |a| {
                a.value_parser(PossibleValuesParser::new(gpus.clone()))
            })
        })
        .mut_subcommand("estimate", |c| {
            // Its --model may be a config.json path too: files complete there.
            c.mut_arg("gpu", |a| {
                a.value_parser(PossibleValuesParser::new(gpus.clone()))
            })
        })
        .mut_subcommand("explain", |c| {
            c.mut_arg("code", |a| a.value_parser(PossibleValuesParser::new(codes)))
        })
}

fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

fn check(files: &[String], format: Format) -> u8 {
    let mut worst = EXIT_OK;
    let mut all_json = Vec::new();
    for file in files {
        let result = dic::disk::InputWorld::for_path(file).and_then(|(world, path)| {
            driver::check_file(&world, &path)
                .map(|c| (c, path))
                .map_err(|e| e.to_string())
        });
        let (checked, path) = match result {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: cannot read `{file}`: {e}");
                worst = EXIT_USAGE;
                continue;
            }
        };
        match format {
            Format::Human => {
                eprint!(
                    "{}",
                    render::human(&checked.db, &checked.diagnostics, color(), width())
                );
                // A file that checks: what dic predicts for each deployment.
                if !checked.has_errors() {
                    eprint!("{}", render::predictions(&checked).0);
                }
                eprintln!("{path}: {}", render::summary(&checked.diagnostics));
            }
            Format::Json => {
                let predicted = if checked.has_errors() {
                    serde_json::Value::Array(Vec::new())
                } else {
                    render::predictions(&checked).1
                };
                all_json.push(serde_json::json!({
                    "file": path,
                    "diagnostics": render::json(&checked.db, &checked.diagnostics),
                    "predicted": predicted,
                }));
            }
        }
        if checked.has_errors() && worst == EXIT_OK {
            worst = EXIT_ERRORS;
        }
    }
    if format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&all_json).unwrap_or_default()
        );
    }
    worst
}

fn explain(code: Option<&str>) -> u8 {
    match code {
        None => {
            for c in Code::ALL {
                println!(
                    "{}  {:<8} {}",
                    c.as_str(),
                    c.default_severity().as_str(),
                    c.title()
                );
            }
            EXIT_OK
        }
        Some(s) => match Code::parse(s) {
            Some(c) => {
                print!("{}", c.explanation());
                EXIT_OK
            }
            None => {
                eprintln!("error: unknown diagnostic code `{s}`");
                eprintln!("help: `dic explain` lists every code");
                EXIT_USAGE
            }
        },
    }
}

fn import_hf(path: &str, name: Option<&str>) -> u8 {
    use dic_compiler::import_hf::{import, names_from_file, ImportRequest};
    let config = match dic::disk::read_text(std::path::Path::new(path)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{path}`: {e}");
            return EXIT_USAGE;
        }
    };
    let p = std::path::Path::new(path);
    let file_name = p
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or("config.json");
    let quant_path = p.with_file_name(dic_compiler::import_hf::quant_config_file_name(file_name));
    let quant = dic::disk::read_text(&quant_path).ok();
    let (derived, repo) = names_from_file(file_name);
    let req = ImportRequest {
        config: &config,
        quant_config: quant.as_deref(),
        name: name.unwrap_or(&derived),
        repo: repo.as_deref(),
        source_name: file_name,
    };
    match import(&req) {
        Ok(text) => {
            print!("{text}");
            EXIT_OK
        }
        Err(d) => {
            let db = dic_compiler::source::SourceDb::new();
            eprint!("{}", render::human(&db, &[*d], color(), width()));
            EXIT_ERRORS
        }
    }
}

/// Numbers may be negative on the command line (`--isl -5`): the schema check refuses
/// them with the field's range, where clap would say "unexpected argument".
#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct EstimateArgs {
    /// A stdlib model (`dic list models`) or a path to a Hugging Face config.json.
    #[arg(long)]
    model: String,
    /// A stdlib GPU or a name as `nvidia-smi` prints it.
    #[arg(long)]
    gpu: String,
    /// GPUs per node (default 8).
    #[arg(long)]
    gpus_per_node: Option<u64>,
    /// Nodes (default: as many as the layout needs).
    #[arg(long)]
    nodes: Option<u64>,
    /// Tensor-parallel size.
    #[arg(long, default_value_t = 1)]
    tp: u64,
    /// Pipeline-parallel stages.
    #[arg(long, default_value_t = 1)]
    pp: u64,
    /// Data-parallel replicas.
    #[arg(long, default_value_t = 1)]
    dp: u64,
    /// Expert parallelism (EP size = tp × dp).
    #[arg(long)]
    ep: bool,
    /// Weight format: bf16, fp16, fp8, int8, int4, awq, gptq, nvfp4, mxfp4.
    #[arg(long)]
    weights: Option<String>,
    /// KV-cache dtype: auto, fp8, …
    #[arg(long)]
    kv_cache_dtype: Option<String>,
    /// Share of GPU memory vLLM may use (vLLM's default 0.92).
    #[arg(long)]
    gpu_memory_utilization: Option<f64>,
    /// Longest request in tokens (default: the model's whole context).
    #[arg(long)]
    max_model_len: Option<f64>,
    /// Requests a replica runs at once (vLLM's default).
    #[arg(long)]
    max_num_seqs: Option<u64>,
    /// Tokens per engine step (vLLM's default).
    #[arg(long)]
    max_num_batched_tokens: Option<f64>,
    /// Which steps run as CUDA graphs: full_and_piecewise (vLLM's default),
    /// full_decode_only, piecewise, none.
    #[arg(long)]
    cudagraph_mode: Option<String>,
    /// Mean input length in tokens (default 1024).
    #[arg(long)]
    isl: Option<f64>,
    /// Mean output length in tokens (default 256).
    #[arg(long)]
    osl: Option<f64>,
    /// Requests in flight (closed loop).
    #[arg(long, conflicts_with = "rate")]
    concurrency: Option<u64>,
    /// Arrival rate in requests per second (open loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Requests in a finite run, as a benchmark sends them: the closed loop's first wave
    /// arrives at once, an overloaded open loop's backlog is bounded (default: steady state).
    #[arg(long)]
    num_requests: Option<u64>,
    /// Price of one node in $/h (for cost figures).
    #[arg(long)]
    price_per_node: Option<f64>,
    /// Print the estimate as JSON, with the decode step by cause (the same as `--format json`).
    #[arg(long)]
    json: bool,
    /// `human` or `json`.
    #[arg(long, value_enum)]
    format: Option<Format>,
}

fn estimate(a: Box<EstimateArgs>) -> u8 {
    let a = *a;
    use dic_compiler::analysis::estimate::EstimateRequest;
    use dic_compiler::program::Layout;
    let req = EstimateRequest {
        gpu: a.gpu,
        gpus_per_node: a.gpus_per_node,
        nodes: a.nodes,
        layout: Layout {
            tp: a.tp,
            pp: a.pp,
            dp: a.dp,
            ep: a.ep,
            dcp: 1,
            pcp: 1,
        },
        weights: a.weights,
        kv_cache_dtype: a.kv_cache_dtype,
        gpu_memory_utilization: a.gpu_memory_utilization,
        max_model_len: a.max_model_len,
        max_num_seqs: a.max_num_seqs,
        max_num_batched_tokens: a.max_num_batched_tokens,
        cudagraph_mode: a.cudagraph_mode,
        isl: a.isl,
        osl: a.osl,
        concurrency: a.concurrency,
        rate: a.rate,
        num_requests: a.num_requests,
        price_per_node_hour: a.price_per_node,
    };
    cli_estimate::run_cli(&a.model, &req, Format::json(a.format, a.json))
}
