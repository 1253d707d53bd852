//! `dic estimate`: one point, no file. The model is a stdlib name or a path to a
//! Hugging Face `config.json` (with `hf_quant_config.json` beside it when present).

use dic::exit::{ERRORS, OK, USAGE};
use dic_compiler::analysis::estimate::{cost, scenario, EstimateRequest};
use dic_compiler::analysis::rules::Anchor;
use dic_compiler::analysis::scenario::Load;
use dic_compiler::analysis::{Analysis, Scenario};
use dic_compiler::diagnostics::Severity;
use dic_compiler::program::Model;
use dic_compiler::units::fmt_bytes;
use serde_json::{json, Value};

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
    let quant_path =
        path.with_file_name(dic_compiler::import_hf::quant_config_file_name(file_name));
    let quant = dic::disk::read_text(&quant_path).ok();
    dic_compiler::import_hf::model_from_config(file_name, &text, quant.as_deref())
        .map_err(|d| format!("{}: {}", d.code, d.message))
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
    let a = dic_compiler::driver::analyze_and_advise(&s, &[]);
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

/// The JSON object `dic estimate --json` prints (bytes as integers, times in ms).
fn to_json(s: &Scenario, a: &Analysis) -> Value {
    let (cost_per_hour, cost_per_million_output_tokens) = cost(s, a);
    let st = a.memory.tightest();
    let p = a.prediction.as_ref();
    let ms = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map(|x| (x * 1e3 * 1000.0).round() / 1000.0)
    };
    json!({
        "model": s.model_name,
        "gpu": s.topology.gpu.name,
        "layout": { "tp": s.layout.tp, "pp": s.layout.pp, "dp": s.layout.dp, "ep": s.layout.ep },
        "gpus": s.layout.gpus(),
        "weights_bytes_per_gpu": st.weights.round() as i64,
        "activation_bytes_per_gpu": st.activations.round() as i64,
        "non_torch_bytes_per_gpu": st.non_torch.round() as i64,
        "cuda_graph_bytes_per_gpu": st.cuda_graphs.round() as i64,
        "kv_cache_bytes_per_gpu": st.kv_cache.round() as i64,
        "kv_cache_tokens": a.memory.kv_cache_tokens,
        "max_concurrency": (a.memory.max_concurrency * 100.0).round() / 100.0,
        "ttft_ms": ms(p.map(|p| p.ttft)),
        // TTFT by cause; the parts add up to `ttft_ms` (an unbounded part is null).
        "ttft_ms_parts": p.map(|p| {
            let t = &p.ttft_parts;
            json!({
                "front_end": ms(Some(t.front_end)),
                "step_wait": ms(Some(t.step_wait)),
                "prefill": ms(Some(t.prefill)),
                "prefill_queue": ms(Some(t.prefill_queue)),
                "admission": ms(Some(t.admission)),
                "first_wave": ms(Some(t.first_wave)),
                "kv_transfer": ms(Some(t.kv_transfer)),
            })
        }),
        "tpot_ms": ms(p.map(|p| p.tpot)),
        "output_tokens_per_s": p.map(|p| p.output_tokens_per_s.round()),
        "output_tokens_per_s_per_gpu": p.map(|p| (p.output_tokens_per_s_per_gpu * 10.0).round() / 10.0),
        "requests_per_s": p.map(|p| (p.requests_per_s * 1000.0).round() / 1000.0),
        "max_output_tokens_per_s": p.map(|p| p.max_output_tokens_per_s.round()),
        "num_requests": s.workload.and_then(|w| w.requests),
        "decode_step_ms": p.map(|p| json!({
            "compute": ms(Some(p.step.compute)),
            "memory": ms(Some(p.step.memory)),
            "communication": ms(Some(p.step.comm)),
            "overhead": ms(Some(p.step.overhead)),
            // The GPU waiting on the CPU's launches in steps run without CUDA graphs.
            "cpu_launches": ms(Some(p.step.cpu_launches)),
            "bubble": ms(Some(p.step.bubble)),
            "draft": ms(Some(p.step.draft)),
            // The kernel groups in sequence (the experts as the fused-MoE curve): with
            // communication, overhead, the CPU's launches and drafting they add up to TPOT
            // (with PP, `bubble` is the idle share of it).
            "kernels": {
                "dense_gemms": ms(Some(p.step.kernels.dense_gemms)),
                "experts": ms(Some(p.step.kernels.experts)),
                "attention": ms(Some(p.step.kernels.attention)),
            },
            "collectives": p.step.comm_items.iter().map(|c| json!({
                "group": c.group.name(),
                "collective": c.collective.name(),
                "count": c.count,
                "bytes": c.bytes.round(),
                "ranks": c.ranks,
                "ms": ms(Some(c.time)),
            })).collect::<Vec<_>>(),
        })),
        "cost_per_hour": cost_per_hour,
        "cost_per_million_output_tokens": cost_per_million_output_tokens,
        "diagnostics": a.findings.iter().map(|f| json!({
            "code": f.code.as_str(),
            "severity": f.severity.as_str(),
            "message": f.message,
            "help": f.help,
            "about": match f.anchor { Anchor::Layout => "layout", Anchor::Model => "model", Anchor::Engine(_) => "engine", _ => "deployment" },
        })).collect::<Vec<_>>(),
    })
}

/// The compact human table.
fn to_table(s: &Scenario, a: &Analysis) -> String {
    let mut out = String::new();
    let w = s.workload.expect("estimate always has a workload");
    out.push_str(&format!(
        "{} on {} × {}, {}\n",
        s.model_name,
        s.layout.gpus(),
        s.topology.gpu.name,
        s.layout
    ));
    out.push_str(&format!(
        "weights {}, KV cache {}, gpu_memory_utilization {:.2}, max_model_len {}, max_num_seqs {}, max_num_batched_tokens {}, CUDA graphs {}\n\n",
        s.model.weights, s.model.kv_cache, s.engine.gpu_memory_utilization, s.engine.max_model_len, s.engine.max_num_seqs, s.engine.max_num_batched_tokens,
        if s.engine.graphs() { s.engine.cudagraph_mode.vllm_name() } else { "none" }
    ));
    out.push_str("memory per GPU       ");
    for st in &a.memory.stages {
        out.push_str(&format!("{:>14}", format!("stage {}", st.stage)));
    }
    out.push('\n');
    type Term = fn(&dic_compiler::analysis::memory::StageMemory) -> f64;
    let rows: [(&str, Term); 6] = [
        ("  budget", |x| x.budget),
        ("  weights", |x| x.weights),
        ("  activations", |x| x.activations),
        ("  non-torch", |x| x.non_torch),
        ("  CUDA graphs", |x| x.cuda_graphs),
        ("  KV cache", |x| x.kv_cache),
    ];
    for (name, f) in rows {
        out.push_str(&format!("{name:<21}"));
        for st in &a.memory.stages {
            out.push_str(&format!("{:>14}", fmt_bytes(f(st))));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "KV cache tokens      {} (max concurrency {:.2} at {} tokens)\n\n",
        a.memory.kv_cache_tokens, a.memory.max_concurrency, s.engine.max_model_len
    ));
    match &a.prediction {
        Some(p) => {
            let mut load = match w.load {
                Load::Rate(r) => format!("{r} req/s"),
                Load::Concurrency(c) => format!("concurrency {c}"),
            };
            if let Some(n) = w.requests {
                load.push_str(&format!(", a run of {n:.0} requests"));
            }
            out.push_str(&format!(
                "workload             {:.0} in / {:.0} out tokens, {load}\n",
                w.prompt, w.output
            ));
            out.push_str(&format!(
                "TTFT                 {}\n",
                if p.ttft.is_finite() {
                    format!("{:.1} ms", p.ttft * 1e3)
                } else {
                    "unbounded (overloaded)".into()
                }
            ));
            if p.ttft.is_finite() {
                out.push_str(&format!("  = {}\n", ttft_parts_line(&p.ttft_parts)));
            }
            out.push_str(&format!("TPOT                 {:.2} ms\n", p.tpot * 1e3));
            out.push_str(&format!(
                "output throughput    {:.0} tokens/s ({:.1} per GPU), {:.3} req/s\n",
                p.output_tokens_per_s, p.output_tokens_per_s_per_gpu, p.requests_per_s
            ));
            out.push_str(&format!(
                "saturated            {:.0} tokens/s\n",
                p.max_output_tokens_per_s
            ));
            if let (Some(h), m) = cost(s, a) {
                out.push_str(&format!(
                    "cost                 ${h:.2}/h{}\n",
                    m.map(|m| format!(", ${m:.3} per million output tokens"))
                        .unwrap_or_default()
                ));
            }
            out.push_str(&format!(
                "decode step          compute {:.2} ms, memory {:.2} ms, communication {:.2} ms, overhead {:.2} ms, CPU launches {:.2} ms, bubble {:.2} ms\n",
                p.step.compute * 1e3,
                p.step.memory * 1e3,
                p.step.comm * 1e3,
                p.step.overhead * 1e3,
                p.step.cpu_launches * 1e3,
                p.step.bubble * 1e3
            ));
            for c in &p.step.comm_items {
                out.push_str(&format!(
                    "  {} {} × {} of {} over {} ranks ({}): {:.3} ms\n",
                    c.group,
                    c.count,
                    c.collective.name(),
                    fmt_bytes(c.bytes),
                    c.ranks,
                    c.link,
                    c.time * 1e3
                ));
            }
        }
        None => {
            out.push_str("no prediction: the deployment does not start (see the diagnostics)\n")
        }
    }
    for f in &a.findings {
        out.push_str(&format!(
            "\n{}[{}]: {}",
            f.severity.as_str(),
            f.code.as_str(),
            f.message
        ));
        if let Some(h) = &f.help {
            out.push_str(&format!("\n  help: {}", h.replace('\n', "\n        ")));
        }
        out.push('\n');
    }
    out
}

/// `front end 35.1 ms + step waited on 3.9 ms + prefill 80.2 ms + …`: the TTFT's nonzero
/// parts in the order a request meets them (a faster first wave subtracts).
fn ttft_parts_line(t: &dic_compiler::analysis::perf::TtftParts) -> String {
    let parts = [
        ("front end", t.front_end),
        ("admission", t.admission),
        ("prefill queue", t.prefill_queue),
        ("step waited on", t.step_wait),
        ("prefill", t.prefill),
        ("KV transfer", t.kv_transfer),
        ("offloaded prefix load", t.kv_offload_load),
        ("first wave", t.first_wave),
    ];
    let mut line = String::new();
    for (name, v) in parts.iter().filter(|(_, v)| v.abs() >= 0.5e-4) {
        let sign = match (line.is_empty(), *v < 0.0) {
            (true, _) => "",
            (false, false) => " + ",
            (false, true) => " - ",
        };
        line.push_str(&format!("{sign}{name} {:.1} ms", v.abs() * 1e3));
    }
    line
}
