//! `dic observe`: a running deployment measured against its `.dist`.
//!
//! The `.dist` is the contract, the running engines are the evidence. This module is
//! IO-free like the rest of the core: the command line scrapes (engines' `/metrics`, a
//! Prometheus query endpoint, saved exposition files) and hands over one [`Snapshot`] of
//! the deployment's engines over a window; [`observe`] compares it with what the file
//! declares (the workload, the SLOs, the engine settings) and what dic predicted, both
//! at the declared load and re-predicted at the load it measured, and says what differs
//! as diagnostics at the spans of the fields concerned:
//!
//! - W1001 the KV cache holds a different number of tokens than predicted (> 5%);
//! - W1002 the workload drifted from the declared one (prompt, output, rate, concurrency);
//! - E1001 an SLO is over its bound at the observed load, said as a model miss (dic
//!   predicted it met at that load) or an overload (dic predicts the miss too);
//! - W1003 the speculative acceptance or the prefix-cache hit rate differs from the
//!   declared `acceptance` / `prefix_reuse`;
//! - W1004 preemptions where dic predicted none.
//!
//! Each drift carries a fix with the measured value, which `--write` applies through the
//! formatter ([`rewrite`]); [`calibrate`] fits the step- and prefill-time factors of a
//! deployment's `calibration { … }` block from the same window.

pub mod calibrate;
pub mod exposition;
pub mod rewrite;
pub mod series;

use crate::analysis::rules::{fmt_metric, predicted, SloTarget};
use crate::analysis::{self, DeploymentScenario, Load, WorkloadSpec};
use crate::diagnostics::{Code, Diagnostic};
use crate::driver::{Checked, Decided};
use crate::program::{SloMetric, Value};
use crate::span::FileSpan;
use serde::Serialize;
pub use series::{names, Snapshot};

/// How far a measurement may be from the declared or predicted value before it is said.
pub mod tolerance {
    /// KV capacity against the prediction (the 5%).
    pub const KV_CAPACITY: f64 = 0.05;
    /// Mean prompt and output lengths, rate and concurrency against the workload.
    pub const WORKLOAD: f64 = 0.15;
    /// Acceptance and prefix-hit rates against the declared ones, in absolute points.
    pub const RATE_POINTS: f64 = 0.05;
    /// Fewest requests a window must hold for its latencies and lengths to be read.
    pub const MIN_REQUESTS: f64 = 20.0;
}

/// What was scraped: the deployment's engines over a window.
#[derive(Debug, Clone)]
pub struct Observation {
    pub window: Snapshot,
    /// The window's length; `None` for one scrape of counters since the engines started
    /// (then no rate is read).
    pub seconds: Option<f64>,
    /// Where the numbers came from, for the provenance comment `--write` leaves.
    pub source: String,
}

/// One quantity, declared, predicted and measured.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub what: String,
    pub unit: String,
    pub declared: Option<f64>,
    pub predicted: Option<f64>,
    pub measured: Option<f64>,
}

/// The measured workload, as the declared one's fields.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct MeasuredWorkload {
    pub prompt: Option<f64>,
    pub output: Option<f64>,
    pub rate: Option<f64>,
    /// Requests in flight (running and waiting) at the end of the window.
    pub concurrency: Option<f64>,
    pub acceptance: Option<f64>,
    pub prefix_hit: Option<f64>,
    pub requests: f64,
}

/// One deployment observed.
#[derive(Debug, Clone, Serialize)]
pub struct Observed {
    pub deployment: String,
    pub engines: usize,
    pub workload: MeasuredWorkload,
    pub rows: Vec<Row>,
    #[serde(skip)]
    pub diagnostics: Vec<Diagnostic>,
}

/// Why nothing could be compared.
#[derive(Debug, Clone, PartialEq)]
pub enum ObserveError {
    NoDeployment(String),
    NotAnalysed(String),
    NoSeries(String),
}

impl std::fmt::Display for ObserveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObserveError::NoDeployment(m)
            | ObserveError::NotAnalysed(m)
            | ObserveError::NoSeries(m) => f.write_str(m),
        }
    }
}

/// The deployment `name` (the file's only one when `None`).
pub fn decided<'a>(checked: &'a Checked, name: Option<&str>) -> Result<&'a Decided, ObserveError> {
    let names: Vec<&str> = checked
        .deployments
        .iter()
        .map(|d| d.scenario.name.as_str())
        .collect();
    let mut matching = checked
        .deployments
        .iter()
        .filter(|d| name.is_none_or(|n| d.scenario.name == n));
    let first = matching.next();
    match (first, name) {
        (Some(d), Some(_)) => Ok(d),
        (Some(d), None) if matching.next().is_none() => Ok(d),
        (Some(_), None) => Err(ObserveError::NoDeployment(format!(
            "the file has {} deployments ({}); say which with --deployment",
            names.len(),
            names.join(", ")
        ))),
        (None, Some(n)) => Err(ObserveError::NoDeployment(format!(
            "no deployment `{n}` in the file (it has: {})",
            names.join(", ")
        ))),
        (None, None) => Err(ObserveError::NoDeployment(
            "the file has no deployment that checks".into(),
        )),
    }
}

/// The model name vLLM labels the deployment's series with (`--served-model-name`).
pub fn served_model_name(checked: &Checked, deployment: &str) -> Option<String> {
    checked
        .plan
        .deployments
        .iter()
        .find(|p| {
            p.name == deployment
                || p.part_of
                    .as_ref()
                    .is_some_and(|o| o.deployment == deployment)
        })
        .map(|p| p.model.served_name.clone())
}

/// Compares one deployment's window with its file and its prediction.
pub fn observe(
    checked: &Checked,
    d: &Decided,
    obs: &Observation,
) -> Result<Observed, ObserveError> {
    let ds = &d.scenario;
    let Some(p) = d.analysis.prediction.as_ref() else {
        return Err(ObserveError::NotAnalysed(format!(
            "deploy `{}` has errors, so dic predicted nothing to compare with; run `dic check`",
            ds.name
        )));
    };
    let w = &obs.window;
    if w.engines.is_empty() {
        return Err(ObserveError::NoSeries(format!(
            "no vLLM series for deploy `{}` in {} (is the model name right?)",
            ds.name, obs.source
        )));
    }
    let measured = measured_workload(w, obs.seconds);
    let fields = Fields::of(checked, ds);
    let mut out = Observed {
        deployment: ds.name.clone(),
        engines: w.engines.len(),
        workload: measured,
        rows: Vec::new(),
        diagnostics: Vec::new(),
    };
    kv_capacity(&mut out, d, w, &fields);
    workload_drift(&mut out, ds, &measured, &fields);
    let at_load = repredict(ds, &measured);
    slo_at_load(&mut out, d, w, &measured, at_load.as_ref(), &fields);
    declared_rates(&mut out, ds, &measured, &fields);
    preemptions(&mut out, ds, w, at_load.as_ref().unwrap_or(p), &fields);
    Ok(out)
}

/// The measured workload: means of the lengths' histograms, the rate of finished
/// requests over the window, the requests in flight at its end, and the two ratios.
pub fn measured_workload(w: &Snapshot, seconds: Option<f64>) -> MeasuredWorkload {
    let requests = w
        .histogram(names::E2E)
        .map(|h| h.count)
        .or(w.counter(names::REQUEST_SUCCESS))
        .unwrap_or(0.0);
    let enough = requests >= tolerance::MIN_REQUESTS;
    let ratio = |num: &str, den: &str| match (w.counter(num), w.counter(den)) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    };
    MeasuredWorkload {
        prompt: w
            .histogram(names::PROMPT_TOKENS)
            .and_then(|h| h.mean())
            .filter(|_| enough),
        output: w
            .histogram(names::OUTPUT_TOKENS)
            .and_then(|h| h.mean())
            .filter(|_| enough),
        rate: match (w.counter(names::REQUEST_SUCCESS), seconds) {
            (Some(n), Some(s)) if s > 0.0 => Some(n / s),
            _ => None,
        },
        concurrency: match (w.gauges.get(names::RUNNING), w.gauges.get(names::WAITING)) {
            (None, None) => None,
            (r, q) => Some(r.copied().unwrap_or(0.0) + q.copied().unwrap_or(0.0)),
        },
        acceptance: ratio(names::SPEC_ACCEPTED, names::SPEC_DRAFTED),
        prefix_hit: ratio(names::PREFIX_HITS, names::PREFIX_QUERIES),
        requests,
    }
}

/// Where each field the observation may speak of was written.
struct Fields {
    deploy: FileSpan,
    workload: Option<FileSpan>,
    prompt: Option<FileSpan>,
    output: Option<FileSpan>,
    rate: Option<FileSpan>,
    concurrency: Option<FileSpan>,
    prefix_reuse: Option<FileSpan>,
    engine: Option<FileSpan>,
    gpu_memory_utilization: Option<FileSpan>,
    acceptance: Option<FileSpan>,
}

impl Fields {
    fn of(checked: &Checked, ds: &DeploymentScenario) -> Fields {
        let p = &checked.program;
        let deploy = p.def(ds.deploy);
        let deploy_at = deploy.map(|d| d.location()).unwrap_or(FileSpan::new(
            crate::span::FileId(0),
            crate::span::Span::default(),
        ));
        let workload_def = deploy
            .and_then(|d| match &d.body {
                crate::program::Body::Deploy(x) => x.workload,
                _ => None,
            })
            .and_then(|id| p.def(id));
        let wf = |k: &str| workload_def.and_then(|d| d.fields.get(k)).map(|f| f.at);
        let engine = deploy.and_then(|d| d.fields.get("engine"));
        let opts = match engine.map(|e| &e.value) {
            Some(Value::Engine(_, o)) => Some(o),
            _ => None,
        };
        let opt = |k: &str| opts.and_then(|o| o.get(k)).map(|f| f.at);
        let acceptance = opts
            .and_then(|o| o.get("speculative"))
            .and_then(|s| match &s.value {
                Value::Engine(_, f) | Value::Block(f) => f.get("acceptance").map(|a| a.at),
                _ => None,
            });
        Fields {
            deploy: deploy_at,
            workload: workload_def.map(|d| d.location()),
            prompt: wf("prompt"),
            output: wf("output"),
            rate: wf("rate"),
            concurrency: wf("concurrency"),
            prefix_reuse: wf("prefix_reuse"),
            engine: engine.map(|e| e.at),
            gpu_memory_utilization: opt("gpu_memory_utilization"),
            acceptance,
        }
    }
}

fn diag(
    code: Code,
    ds: &DeploymentScenario,
    at: FileSpan,
    message: String,
    label: String,
) -> Diagnostic {
    Diagnostic::new(code, format!("deploy `{}`: {message}", ds.name))
        .primary(at.file, at.span, label)
}

fn off(measured: f64, reference: f64) -> f64 {
    if reference == 0.0 {
        if measured == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (measured - reference) / reference
    }
}

/// W1001: each engine's KV capacity against the predicted one; what differs in the
/// engine's settings is named (memory utilization, block size, cache dtype), else the
/// memory model is.
fn kv_capacity(out: &mut Observed, d: &Decided, w: &Snapshot, f: &Fields) {
    let ds = &d.scenario;
    let predicted = d.analysis.memory.kv_cache_tokens as f64;
    let engines: Vec<f64> = w.cache.iter().filter_map(|c| c.kv_tokens()).collect();
    if engines.is_empty() {
        return;
    }
    let mean = engines.iter().sum::<f64>() / engines.len() as f64;
    out.rows.push(Row {
        what: "KV cache per engine".into(),
        unit: "tokens".into(),
        declared: None,
        predicted: Some(predicted),
        measured: Some(mean),
    });
    let worst = engines
        .iter()
        .copied()
        .max_by(|a, b| {
            off(*a, predicted)
                .abs()
                .total_cmp(&off(*b, predicted).abs())
        })
        .unwrap_or(mean);
    let e = off(worst, predicted);
    if e.abs() <= tolerance::KV_CAPACITY {
        return;
    }
    let engine = &ds.scenario.engine;
    let info = &w.cache[0];
    let mut causes = Vec::new();
    let mut at = f.engine.unwrap_or(f.deploy);
    if let Some(u) = info.gpu_memory_utilization {
        if (u - engine.gpu_memory_utilization).abs() > 1e-6 {
            causes.push(format!(
                "the engines run with gpu_memory_utilization {u}, the file says {}",
                engine.gpu_memory_utilization
            ));
            at = f.gpu_memory_utilization.unwrap_or(at);
        }
    }
    if let Some(b) = info.block_size {
        if b as u64 != engine.block_size {
            causes.push(format!(
                "block size {b} on the engines, {} in dic's plan",
                engine.block_size
            ));
        }
    }
    if let Some(dt) = &info.cache_dtype {
        let planned = d.scenario.scenario.model.kv_cache.as_str();
        let same =
            dt == "auto" && matches!(planned, "bf16" | "fp16" | "auto") || dt.starts_with(planned);
        if !same {
            causes.push(format!(
                "KV cache dtype `{dt}` on the engines, `{planned}` in the file"
            ));
        }
    }
    let why = if causes.is_empty() {
        "the engines' settings are the file's, so dic's memory model is off for this model \
         and GPU (the profile run's activations, the CUDA graphs or the non-torch memory); \
         `dic explain W1001` says how to pin the figures"
            .to_string()
    } else {
        causes.join("; ")
    };
    out.diagnostics.push(
        diag(
            Code::KvCapacityDiffers,
            ds,
            at,
            format!(
                "an engine's KV cache holds {:.0} tokens, dic predicted {:.0} ({:+.0}%)",
                worst,
                predicted,
                e * 100.0
            ),
            "settings of the engine measured".into(),
        )
        .note(why),
    );
}

fn fmt_tokens(v: f64) -> String {
    format!("{:.0} tokens", v.round())
}

/// W1002: the measured workload outside the declared one (each field on its own span,
/// with the measured value as its fix).
fn workload_drift(out: &mut Observed, ds: &DeploymentScenario, m: &MeasuredWorkload, f: &Fields) {
    let Some(wl) = ds.scenario.workload else {
        return;
    };
    let mut check = |what: &str,
                     unit: &str,
                     declared: f64,
                     measured: Option<f64>,
                     at: Option<FileSpan>,
                     text: String| {
        out.rows.push(Row {
            what: what.into(),
            unit: unit.into(),
            declared: Some(declared),
            predicted: None,
            measured,
        });
        let (Some(v), Some(at)) = (measured, at) else {
            return;
        };
        let e = off(v, declared);
        if e.abs() <= tolerance::WORKLOAD {
            return;
        }
        out.diagnostics.push(
            diag(
                Code::WorkloadDrift,
                ds,
                at,
                format!("the {what} measured is {text}, the workload declares {} ({:+.0}%)", fmt_declared(what, declared), e * 100.0),
                "declared".into(),
            )
            .fix(format!("use the measured {what}"), at, text.clone())
            .help("`dic observe --write` puts the measured values in the file; then `dic plan` re-plans on what runs"),
        );
    };
    check(
        "prompt",
        "tokens",
        wl.prompt,
        m.prompt,
        f.prompt,
        m.prompt.map(fmt_tokens).unwrap_or_default(),
    );
    check(
        "output",
        "tokens",
        wl.output,
        m.output,
        f.output,
        m.output.map(fmt_tokens).unwrap_or_default(),
    );
    match wl.load {
        Load::Rate(r) => check(
            "rate",
            "req/s",
            r,
            m.rate,
            f.rate,
            m.rate.map(fmt_rate).unwrap_or_default(),
        ),
        Load::Concurrency(c) => check(
            "concurrency",
            "requests",
            c as f64,
            m.concurrency,
            f.concurrency,
            m.concurrency
                .map(|c| format!("{}", c.round().max(1.0)))
                .unwrap_or_default(),
        ),
    }
}

fn fmt_declared(what: &str, v: f64) -> String {
    match what {
        "rate" => fmt_rate(v),
        "concurrency" => format!("{v}"),
        _ => fmt_tokens(v),
    }
}

fn fmt_rate(r: f64) -> String {
    if r >= 10.0 {
        format!("{:.0} req/s", r)
    } else {
        format!("{:.2} req/s", r).replace(".00 ", " ")
    }
}

fn fmt_percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The deployment's prediction at the measured workload (the declared one where a field
/// was not measured): what dic says of the load the engines really carry.
pub fn repredict(
    ds: &DeploymentScenario,
    m: &MeasuredWorkload,
) -> Option<analysis::perf::Prediction> {
    let wl = ds.scenario.workload?;
    let load = match (m.rate, m.concurrency, wl.load) {
        (Some(r), _, Load::Rate(_)) => Load::Rate(r),
        (_, Some(c), Load::Concurrency(_)) => Load::Concurrency(c.round().max(1.0) as u64),
        (Some(r), _, _) => Load::Rate(r),
        (_, _, l) => l,
    };
    let prompt = m.prompt.unwrap_or(wl.prompt);
    let mut spec = WorkloadSpec {
        prompt,
        output: m.output.unwrap_or(wl.output),
        load,
        ..wl
    };
    if let Some(h) = m.prefix_hit {
        if wl.cached_prompt > 0.0 || ds.scenario.engine.enable_prefix_caching == Some(true) {
            spec.cached_prompt = (h * prompt).min((prompt - 1.0).max(0.0));
        }
    }
    let mut s = ds.clone();
    s.scenario.workload = Some(spec);
    if let (Some(a), Some(sd)) = (m.acceptance, s.scenario.engine.speculative.as_mut()) {
        sd.acceptance = a;
    }
    if let Some(part) = s.pool.as_mut() {
        part.peer.workload = Some(spec);
    }
    let a = match &s.pool {
        Some(part) => analysis::analyze_pool(&s.scenario, part, &s.slo),
        None => analysis::analyze(&s.scenario, &s.slo),
    };
    a.prediction
}

/// The measured value of an SLO's metric over the window.
pub fn measured_slo(
    w: &Snapshot,
    m: &MeasuredWorkload,
    t: &SloTarget,
    seconds: Option<f64>,
) -> Option<f64> {
    let latency = |name: &str| {
        let h = w.histogram(name)?;
        if h.count < tolerance::MIN_REQUESTS {
            return None;
        }
        match t.percentile.as_str() {
            "mean" => h.mean(),
            p => p
                .strip_prefix('p')
                .and_then(|q| q.parse::<f64>().ok())
                .and_then(|q| h.quantile(q / 100.0)),
        }
    };
    match t.metric {
        SloMetric::Ttft => latency(names::TTFT),
        SloMetric::Tpot => latency(names::TPOT),
        SloMetric::Itl => latency(names::ITL),
        SloMetric::E2e => latency(names::E2E),
        SloMetric::Throughput => match (w.counter(names::GENERATION_TOKENS), seconds) {
            (Some(n), Some(s)) if s > 0.0 => Some(n / s),
            _ => None,
        },
        SloMetric::RequestRate => m.rate,
    }
}

fn slo_unit(metric: SloMetric) -> &'static str {
    match metric {
        SloMetric::Throughput => "tokens/s",
        SloMetric::RequestRate => "req/s",
        _ => "s",
    }
}

/// E1001: each SLO measured against its bound; a miss says whether dic predicts it at
/// the measured load (an overload: the load is not the declared one, or the layout
/// cannot carry it) or not (a model miss: `--calibrate` fits the model to the engines).
fn slo_at_load(
    out: &mut Observed,
    d: &Decided,
    w: &Snapshot,
    m: &MeasuredWorkload,
    at_load: Option<&analysis::perf::Prediction>,
    f: &Fields,
) {
    let ds = &d.scenario;
    let output = m
        .output
        .or(ds.scenario.workload.map(|w| w.output))
        .unwrap_or(1.0);
    let seconds = out_seconds(m, w);
    for (i, t) in ds.slo.iter().enumerate() {
        let declared_prediction = d
            .analysis
            .slo
            .iter()
            .find(|r| r.target.label() == t.label())
            .map(|r| r.predicted);
        let here = at_load.map(|p| predicted(p, t, output));
        let measured = measured_slo(w, m, t, seconds);
        out.rows.push(Row {
            what: t.label(),
            unit: slo_unit(t.metric).into(),
            declared: Some(t.value),
            predicted: here.or(declared_prediction),
            measured,
        });
        let Some(v) = measured else {
            continue;
        };
        if slo_holds(t, v) {
            continue;
        }
        let at = ds.slo_spans.get(i).copied().unwrap_or(f.deploy);
        let (kind, note) = match here {
            Some(p) if !slo_holds(t, p) => (
                "an overload",
                format!(
                    "dic predicts {} at the measured load too: the engines carry more than the layout serves within the bound",
                    fmt_metric(t.metric, p)
                ),
            ),
            Some(p) => (
                "a model miss",
                format!(
                    "dic predicted {} at the measured load: its model is off for these engines; `dic observe --calibrate` fits it to them",
                    fmt_metric(t.metric, p)
                ),
            ),
            None => ("unexplained", "dic could not predict the measured load".to_string()),
        };
        out.diagnostics.push(
            diag(
                Code::SloMissedObserved,
                ds,
                at,
                format!(
                    "{} measured {} over the window, the bound is {} ({kind})",
                    t.label(),
                    fmt_metric(t.metric, v),
                    fmt_metric(t.metric, t.value)
                ),
                "bound missed on the engines".into(),
            )
            .note(note),
        );
    }
}

/// The window's length, when a rate was read (the throughput SLO needs it).
fn out_seconds(m: &MeasuredWorkload, w: &Snapshot) -> Option<f64> {
    match (m.rate, w.counter(names::REQUEST_SUCCESS)) {
        (Some(r), Some(n)) if r > 0.0 => Some(n / r),
        _ => None,
    }
}

fn slo_holds(t: &SloTarget, v: f64) -> bool {
    match t.op {
        crate::syntax::ast::Op::Le | crate::syntax::ast::Op::Lt => v <= t.value,
        crate::syntax::ast::Op::Ge | crate::syntax::ast::Op::Gt => v >= t.value,
        _ => true,
    }
}

/// W1003: acceptance and prefix-hit rates against the declared ones.
fn declared_rates(out: &mut Observed, ds: &DeploymentScenario, m: &MeasuredWorkload, f: &Fields) {
    if let (Some(sd), Some(a)) = (ds.scenario.engine.speculative.as_ref(), m.acceptance) {
        out.rows.push(Row {
            what: "speculative acceptance".into(),
            unit: "ratio".into(),
            declared: Some(sd.acceptance),
            predicted: None,
            measured: Some(a),
        });
        if (a - sd.acceptance).abs() > tolerance::RATE_POINTS {
            let at = f.acceptance.or(f.engine).unwrap_or(f.deploy);
            out.diagnostics.push(
                diag(
                    Code::DeclaredRateDiffers,
                    ds,
                    at,
                    format!(
                        "vLLM accepted {} of the drafted tokens, the file declares acceptance {}",
                        fmt_percent(a),
                        fmt_percent(sd.acceptance)
                    ),
                    "declared".into(),
                )
                .fix("use the measured acceptance", at, fmt_percent(a)),
            );
        }
    }
    if let (Some(wl), Some(h)) = (ds.scenario.workload, m.prefix_hit) {
        let declared = if wl.prompt > 0.0 {
            wl.declared_reuse / wl.prompt
        } else {
            0.0
        };
        out.rows.push(Row {
            what: "prefix-cache hit rate".into(),
            unit: "ratio".into(),
            declared: Some(declared),
            predicted: None,
            measured: Some(h),
        });
        if (h - declared).abs() > tolerance::RATE_POINTS {
            let at = f.prefix_reuse.or(f.workload).unwrap_or(f.deploy);
            let mut dg = diag(
                Code::DeclaredRateDiffers,
                ds,
                at,
                format!(
                    "the prefix cache served {} of the prompt tokens, the workload declares {}",
                    fmt_percent(h),
                    fmt_percent(declared)
                ),
                "declared".into(),
            );
            if f.prefix_reuse.is_some() {
                dg = dg.fix("use the measured prefix reuse", at, fmt_percent(h));
            } else {
                dg = dg.help(format!(
                    "add `prefix_reuse = {}` to the workload",
                    fmt_percent(h)
                ));
            }
            out.diagnostics.push(dg);
        }
    }
}

/// W1004: preemptions in the window where the prediction at the measured load keeps the
/// running requests under the KV cache's capacity.
fn preemptions(
    out: &mut Observed,
    ds: &DeploymentScenario,
    w: &Snapshot,
    p: &analysis::perf::Prediction,
    f: &Fields,
) {
    let Some(n) = w.counter(names::PREEMPTIONS) else {
        return;
    };
    let predicted_none = p.running < p.running_cap * 0.98 && !p.overloaded;
    out.rows.push(Row {
        what: "preemptions".into(),
        unit: "requests".into(),
        declared: None,
        predicted: Some(if predicted_none { 0.0 } else { f64::NAN }),
        measured: Some(n),
    });
    if n > 0.0 && predicted_none {
        out.diagnostics.push(
            diag(
                Code::UnpredictedPreemptions,
                ds,
                f.engine.unwrap_or(f.deploy),
                format!(
                    "vLLM preempted {n:.0} requests in the window; dic predicted {:.0} running per replica against room for {:.0}",
                    p.running, p.running_cap
                ),
                "engine measured".into(),
            )
            .note("the KV cache filled: longer requests than declared, a smaller cache than predicted (see W1001), or more in flight"),
        );
    }
}

#[cfg(test)]
mod tests;
