//! `dic init --gpu NAME --nodes N --model MODEL [--gpus-per-node G] [--rate R] [--out FILE]`:
//! a starter `.dist` file from what a newcomer knows — the GPU as `nvidia-smi` prints it,
//! how many nodes, a stdlib model, the request rate. The node takes its NVLink,
//! NVLink-domain size and NICs from the stdlib node with that GPU when there is one; the
//! deployment says `layout = auto`.
//!
//! `dic init` always writes the file (never over an existing one). It checks the text
//! first and, when it does not check, changes what a newcomer would have to: the context
//! (`max_model_len`, when the model's whole context is what does not fit — the planner's
//! own context search, `planner::search_fitting_context`), then the SLO (to what the
//! closest layout reaches, with headroom, when the default is out of this hardware's
//! reach). Each change is a comment in the file and a line on stderr. When the load still
//! overloads every layout, the file is written with `dic check`'s diagnostics as comments
//! at its top (they say how many GPUs or what rate would carry it) and the exit code is 1.

use dic::disk::DiskWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic_compiler::analysis::DeploymentScenario;
use dic_compiler::driver::Checked;
use dic_compiler::planner::{search_fitting_context, space_of, thousands, Search};
use dic_compiler::program::{Body, Program};
use dic_compiler::schema::Kind;

pub struct InitArgs<'a> {
    pub gpu: &'a str,
    pub nodes: u64,
    pub gpus_per_node: u64,
    pub model: &'a str,
    /// Requests per second the workload offers.
    pub rate: f64,
    /// Whether the user gave the rate (dic init lowers only its own default).
    pub rate_given: bool,
    pub out: &'a str,
}

/// dic init's default SLO for interactive chat: (TTFT p95, TPOT p95) in ms.
const DEFAULT_SLO_MS: (f64, f64) = (1000.0, 50.0);

/// What `dic init` decided beyond the defaults, each with the sentence that says why.
#[derive(Default)]
struct Choices {
    /// `max_model_len` and why.
    context: Option<(u64, String)>,
    /// The request rate and why, when dic init lowered its default.
    rate: Option<(f64, String)>,
    /// (TTFT p95 ms, TPOT p95 ms) and why, when not the default.
    slo: Option<((f64, f64), String)>,
    /// `dic check`'s diagnostics on the text, as comment lines, when it still does not check.
    diagnostics: Vec<String>,
}

pub fn run(a: &InitArgs<'_>, color: bool, width: usize) -> u8 {
    let Some((_, gpu)) = dic_compiler::stdlib::find_gpu(a.gpu) else {
        eprintln!(
            "error: no stdlib GPU is called `{}`; `dic list gpus` shows them (names as nvidia-smi prints them work)",
            a.gpu
        );
        return USAGE;
    };
    if a.nodes == 0 || a.gpus_per_node == 0 {
        eprintln!("error: --nodes and --gpus-per-node must be at least 1");
        return USAGE;
    }
    if !(a.rate.is_finite() && a.rate > 0.0) {
        eprintln!("error: --rate must be a positive number of requests per second");
        return USAGE;
    }
    let stdlib = dic_compiler::driver::check_stdlib();
    let p = &stdlib.program;
    if p.by_name(Kind::Model, a.model).is_none() {
        eprintln!(
            "error: no stdlib model is called `{}`; `dic list models` shows them (`dic import-hf config.json` writes one from a Hugging Face config)",
            a.model
        );
        return USAGE;
    }
    let path = std::path::Path::new(a.out);
    if path.exists() {
        eprintln!(
            "error: `{}` exists; dic init never overwrites a file",
            a.out
        );
        return USAGE;
    }
    let (text, checked, choices) = settle(p, &gpu, a);
    if let Err(e) = dic::disk::write_atomic(path, &text) {
        eprintln!("error: cannot write `{}`: {e}", a.out);
        return USAGE;
    }
    let what = format!(
        "{} on {} × {} × {gpu} at {} req/s",
        a.model,
        a.nodes,
        a.gpus_per_node,
        choices.rate.as_ref().map_or(a.rate, |r| r.0)
    );
    let changes = [
        choices.context.as_ref().map(|c| &c.1),
        choices.rate.as_ref().map(|r| &r.1),
        choices.slo.as_ref().map(|s| &s.1),
    ];
    for why in changes.into_iter().flatten() {
        eprintln!("changed: {why}");
    }
    if checked.has_errors() {
        eprint!(
            "{}",
            dic::render::human(&checked.db, &checked.diagnostics, color, width)
        );
        eprintln!(
            "wrote {}: {what}, which does not check yet (above; the diagnostics are also at the top of the file); fix what they say, then `dic check {}`",
            a.out, a.out
        );
        return ERRORS;
    }
    eprint!("{}", dic::render::predictions(&checked).0);
    eprintln!(
        "wrote {}: {what}, layout = auto; it checks; next: `dic plan {}`, then `dic compile {} --out out`",
        a.out, a.out, a.out
    );
    OK
}

/// The starter text and its check, after the changes that make it check where one does:
/// the context first (the planner's context search), then the rate (only dic init's
/// default, never one the user gave), then the SLO; else the text with the diagnostics at
/// its top.
fn settle(p: &Program, gpu: &str, a: &InitArgs<'_>) -> (String, Checked, Choices) {
    let mut choices = Choices::default();
    let check = |c: &Choices| {
        let text = starter(p, gpu, a, c);
        let checked = dic_compiler::driver::check_text(&DiskWorld, a.out, &text);
        (text, checked)
    };
    let (mut text, mut checked) = check(&choices);
    for _ in 0..3 {
        if !checked.has_errors() {
            return (text, checked, choices);
        }
        let Some((ds, found)) = search_of(&checked) else {
            break;
        };
        if let (None, Some(fit)) = (&choices.context, &found.context) {
            choices.context = Some((
                fit.max_model_len,
                format!(
                    "max_model_len lowered from the model's {} to {} tokens: the whole context does not fit {} × {gpu} beside the weights (the workload's requests need {})",
                    thousands(fit.from),
                    thousands(fit.max_model_len),
                    a.nodes * a.gpus_per_node,
                    thousands(fit.needed)
                ),
            ));
        } else if let Some(change) = next_change(&ds, &found, a, &choices) {
            change(&mut choices);
        } else {
            break;
        }
        (text, checked) = check(&choices);
    }
    if checked.has_errors() {
        choices.diagnostics = checked
            .diagnostics
            .iter()
            .filter(|d| d.severity == dic_compiler::diagnostics::Severity::Error)
            .flat_map(|d| {
                let mut lines = vec![format!("{}: {}", d.code, d.message)];
                lines.extend(d.help.iter().map(|h| format!("help: {h}")));
                lines
            })
            .collect();
        text = starter(p, gpu, a, &choices);
    }
    (text, checked, choices)
}

type Change = Box<dyn FnOnce(&mut Choices)>;

/// After the context: dic init's default rate lowered to what the hardware serves (the
/// closest layout overloaded, the user gave no rate); else the SLO relaxed to what the
/// layout that carries the load predicts (the SLO out of reach however many replicas —
/// on this cluster, or on one large enough to carry the load, so that E0701 can then say
/// how many GPUs carry it). `None` when neither applies.
fn next_change(
    ds: &DeploymentScenario,
    found: &Search,
    a: &InitArgs<'_>,
    choices: &Choices,
) -> Option<Change> {
    let closest = found.closest.as_ref()?;
    let output = ds
        .scenario
        .workload
        .as_ref()
        .map_or(1.0, |w| w.output.max(1.0));
    let served = closest.max_output_tokens_per_s.unwrap_or(0.0) / output;
    if closest.overloaded && !a.rate_given && choices.rate.is_none() && served > 0.0 {
        // 70% of what the closest layout serves saturated, to two significant figures.
        let rate = two_figures(served * 0.7);
        let why = format!(
            "rate lowered from dic init's default {} req/s to {rate} req/s: `{}` on this hardware serves {served:.2} req/s saturated (give `--rate` for your traffic; `dic check` then says how many GPUs carry it)",
            a.rate,
            closest.describe()
        );
        return Some(Box::new(move |c: &mut Choices| c.rate = Some((rate, why))));
    }
    if choices.slo.is_some() {
        return None;
    }
    // The layout the SLO is judged on: the closest, or where it is overloaded, the
    // planner's choice without SLOs on a cluster large enough to carry the load.
    let judged = if closest.overloaded {
        let mut bigger = ds.scenario.clone();
        let rate = ds.scenario.workload.as_ref().and_then(|w| w.rate())?;
        let factor = (rate / served.max(1e-9)).ceil().clamp(1.0, 64.0) as u64 * 2;
        bigger.topology.nodes = ds.scenario.topology.nodes * factor;
        let space = space_of(ds);
        if dic_compiler::planner::search(&bigger, &ds.slo, &space)
            .chosen
            .is_some()
        {
            // The SLO is reachable with more GPUs: E0701 says how many.
            return None;
        }
        dic_compiler::planner::search(&bigger, &[], &space).chosen?
    } else {
        closest.clone()
    };
    let (ttft, tpot) = DEFAULT_SLO_MS;
    let bounds = (
        ttft.max(round_up(judged.ttft_ms.unwrap_or(ttft) * 1.25, 100.0)),
        tpot.max(round_up(judged.tpot_ms.unwrap_or(tpot) * 1.25, 10.0)),
    );
    let why = format!(
        "SLO relaxed from dic init's default (ttft.p95 <= {ttft} ms, tpot.p95 <= {tpot} ms), which this hardware cannot meet at this load: `{}` predicts TTFT {:.0} ms and TPOT {:.1} ms",
        judged.describe(),
        judged.ttft_ms.unwrap_or(f64::NAN),
        judged.tpot_ms.unwrap_or(f64::NAN)
    );
    Some(Box::new(move |c: &mut Choices| c.slo = Some((bounds, why))))
}

/// `v` to two significant figures, rounded down (a rate to offer, not to exceed).
fn two_figures(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 0.1;
    }
    let scale = 10f64.powf(v.log10().floor() - 1.0);
    ((v / scale).floor() * scale * 1e6).round() / 1e6
}

/// The planner's search of the starter's one deployment (with its context search), as
/// `dic check` ran it.
fn search_of(checked: &Checked) -> Option<(DeploymentScenario, Search)> {
    let ds = dic_compiler::analysis::scenarios_from_program(&checked.program)
        .into_iter()
        .next()?;
    let found = search_fitting_context(&ds.scenario, &ds.slo, &space_of(&ds));
    Some((ds, found))
}

/// `v` rounded up to a multiple of `step`.
fn round_up(v: f64, step: f64) -> f64 {
    if v.is_finite() {
        (v / step).ceil() * step
    } else {
        step
    }
}

/// The comment lines of a sentence wrapped at about 88 columns.
fn comment(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + word.chars().count() > 86 {
            out.push_str(&format!("{indent}// {line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}// {line}\n"));
    }
    out
}

/// The starter text: imports, a node like the stdlib's with this GPU, a cluster, a chat
/// workload and SLO to edit, and a deployment the planner lays out, with `choices`.
fn starter(p: &Program, gpu: &str, a: &InitArgs<'_>, choices: &Choices) -> String {
    // The stdlib node with this GPU (the most GPUs per node first): its links.
    let like = p
        .defs
        .iter()
        .flatten()
        .filter_map(|d| match &d.body {
            Body::Node(n) if n.gpu.and_then(|g| p.def(g)).is_some_and(|g| g.name == gpu) => Some(n),
            _ => None,
        })
        .max_by_key(|n| n.gpu_count);
    let name_of = |id| p.def(id).map(|d| d.name.clone());
    let mut node = format!("node my_node {{\n  gpus = {} × {gpu}\n", a.gpus_per_node);
    if let Some(n) = like {
        if let Some(link) = n.scale_up.and_then(name_of) {
            node.push_str(&format!(
                "  scale_up = {link} // as the stdlib's nodes with this GPU\n"
            ));
            if n.scale_up_domain > n.gpu_count {
                node.push_str(&format!(
                    "  scale_up_domain = {} // GPUs in one NVLink domain, across nodes\n",
                    n.scale_up_domain
                ));
            }
        }
        if let Some((count, link)) = n.nics.and_then(|(c, id)| name_of(id).map(|l| (c, l))) {
            node.push_str(&format!("  nics = {count} × {link}\n"));
        }
    }
    node.push_str("}\n");
    let mut head = String::new();
    if !choices.diagnostics.is_empty() {
        head.push_str(
            "// dic init could not make this file check: `dic check` says (fix what it says):\n",
        );
        for line in &choices.diagnostics {
            head.push_str(&comment(line, ""));
        }
        head.push('\n');
    }
    let (ttft, tpot) = choices.slo.as_ref().map_or(DEFAULT_SLO_MS, |(b, _)| *b);
    let slo_note = match &choices.slo {
        Some((_, why)) => comment(why, "  "),
        None => "  // dic init's default for interactive chat; `dic check` says whether this hardware meets it\n".into(),
    };
    let (rate, rate_note) = match &choices.rate {
        Some((r, why)) => (*r, comment(why, "  ")),
        None => (a.rate, String::new()),
    };
    let engine = match &choices.context {
        Some((len, why)) => format!(
            "{}  engine = vllm {{ max_model_len = {len} tokens }}\n",
            comment(why, "  ")
        ),
        None => String::new(),
    };
    format!(
        "{head}// Generated by `dic init`: a starting point. Edit the workload and the SLOs to your\n\
         // traffic, then `dic check` this file; `layout = auto` lets the planner choose the\n\
         // layout (`dic plan` shows why). docs/language.md lists every field.\n\
         import std.gpus.*\n\
         import std.links.*\n\
         import std.models.{model}\n\n\
         {node}\n\
         cluster my_cluster {{\n  nodes = {nodes} × my_node\n}}\n\n\
         workload chat {{\n  prompt = 2k tokens\n  output = 512 tokens\n{rate_note}  rate = {rate} req/s\n}}\n\n\
         slo chat {{\n{slo_note}  ttft.p95 <= {ttft} ms\n  tpot.p95 <= {tpot} ms\n}}\n\n\
         deploy chat {{\n  model = {model}\n  cluster = my_cluster\n  workload = chat\n  slo = chat\n  layout = auto\n{engine}}}\n",
        model = a.model,
        nodes = a.nodes,
    )
}
