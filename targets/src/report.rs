//! The cost report: `report.md`, `report.json` and `report.html` (one self-contained
//! page, inline SVG charts, no network), from minijinja templates embedded in the binary.
//!
//! The data comes from the IR: the launch plan's deployment and its forecast
//! (`DeploymentForecast::report`); this module only formats it.
//! `report.json` is the IR's report data with the deployment's identity, under a
//! `schema` version (documented in docs/report-json.md).

use crate::chart::{num, text_width, Axis, Side, Svg, AROUND, SMALL};
use dic_compiler::ir::{DeploymentForecast, DeploymentPlan, InputDigest, LaunchPlan, ReportData};
use minijinja::{Environment, Value};
use serde::Serialize;

pub const REPORT_SCHEMA: &str = "dic-report/1";

const MD: &str = include_str!("../templates/report.md.j2");
const HTML: &str = include_str!("../templates/report.html.j2");

fn env() -> Environment<'static> {
    let mut e = Environment::new();
    e.set_trim_blocks(true);
    e.add_filter("gib", |v: f64| format!("{:.2} GiB", v / 1073741824.0));
    e.add_filter("money", |v: Option<f64>| {
        v.map(|x| format!("${x:.2}")).unwrap_or_else(|| "—".into())
    });
    e.add_filter("num1", |v: Option<f64>| {
        v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
    });
    e.add_filter("num0", |v: Option<f64>| {
        v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "—".into())
    });
    e.add_template("report.md", MD)
        .expect("embedded template parses");
    e.add_template("report.html", HTML)
        .expect("embedded template parses");
    e
}

/// What made the report: dic's version and the digests of the input files.
#[derive(Serialize)]
struct Generator<'a> {
    dic: &'a str,
    inputs: &'a [InputDigest],
}

#[derive(Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    generator: Generator<'a>,
    deployment: &'a str,
    model: &'a str,
    model_source: &'a str,
    gpu: &'a str,
    layout: String,
    launch: dic_compiler::ir::LaunchMode,
    engine: &'a serde_json::Value,
    predicted: &'a dic_compiler::ir::PredictedPlan,
    report: ReportView<'a>,
}

/// The report data with the deployment's rank placement (from the communication plan)
/// first, as `report.json` has always had it.
#[derive(Serialize)]
struct ReportView<'a> {
    ranks: &'a [dic_compiler::ir::RankPlacement],
    #[serde(flatten)]
    data: &'a ReportData,
}

/// The memory chart's parts: name, colour, and whether its value label is drawn in white.
const COLORS: [(&str, &str, bool); 6] = [
    ("weights", "#4e79a7", true),
    ("activations", "#f28e2b", false),
    ("non-torch", "#76b7b2", false),
    ("CUDA graphs", "#b07aa1", true),
    ("KV cache", "#59a14f", true),
    ("free", "#d3d3d3", false),
];

const GIB: f64 = 1073741824.0;

/// Stacked bars, one per PP stage, on a GiB axis as long as the card: weights,
/// activations, non-torch, graphs, KV cache and free, each with its GiB figure where it
/// is wide enough to hold it (the table under the chart has them all).
fn memory_svg(r: &ReportData) -> String {
    let (width, x0, x1, top, bar, gap) = (680.0, 70.0, 660.0, 10.0, 24.0, 12.0);
    let card = r
        .memory
        .first()
        .map(|m| m.total as f64 / GIB)
        .unwrap_or(0.0);
    let widest = r
        .memory
        .iter()
        .map(|m| {
            (m.weights + m.activations + m.non_torch + m.cuda_graphs + m.kv_cache + m.free) as f64
                / GIB
        })
        .fold(card, f64::max);
    let axis = Axis::fixed(widest, 6);
    let axis_y = top + r.memory.len() as f64 * (bar + gap);
    let legend_y = axis_y + 56.0;
    let height = legend_y + 10.0;
    let mut s = Svg::new("memory", width, height, "memory per GPU");
    for (i, m) in r.memory.iter().enumerate() {
        let y = top + i as f64 * (bar + gap);
        s.text(0.0, y + 16.0, "start", 12.0, &format!("stage {}", m.stage));
        let parts = [
            m.weights,
            m.activations,
            m.non_torch,
            m.cuda_graphs,
            m.kv_cache,
            m.free,
        ];
        let mut x = x0;
        for (p, (name, color, white)) in parts.iter().zip(COLORS) {
            let gib = *p as f64 / GIB;
            let w = axis.at(gib, x0, x1) - x0;
            let value = num(gib, 1);
            s.rect(x, y, w, bar, color, &format!("{name}: {gib:.2} GiB"));
            if text_width(&value, SMALL) + 6.0 <= w {
                let fill = if white { "#ffffff" } else { "#1d232b" };
                s.text_fill(x + w / 2.0, y + 16.0, "middle", SMALL, fill, &value);
            }
            x += w;
        }
    }
    s.x_axis(
        &axis,
        x0,
        x1,
        axis_y,
        top,
        &format!("GiB per GPU ({} GiB card)", num(card, 1)),
    );
    for (i, (name, color, _)) in COLORS.iter().enumerate() {
        let x = x0 + i as f64 * 98.0;
        s.rect(x, legend_y - 9.0, 10.0, 10.0, color, name);
        s.text(x + 14.0, legend_y, "start", SMALL, name);
    }
    s.finish()
}

/// Horizontal bars on a milliseconds axis: what one decode step spends its time on — the
/// kernel groups, communication, overhead, the CPU's launches and drafting (which add up
/// to TPOT), and the
/// pipeline bubble — each with its value.
fn step_svg(r: &ReportData) -> String {
    let Some(st) = &r.step else {
        return String::new();
    };
    let mut rows = vec![
        ("dense GEMMs", st.dense_gemms_ms, "#4e79a7"),
        ("experts", st.experts_ms, "#76b7b2"),
        ("attention", st.attention_ms, "#59a14f"),
        ("communication", st.communication_ms, "#e15759"),
        ("overhead", st.overhead_ms, "#9c755f"),
        ("CPU launches", st.cpu_launches_ms, "#ff9da7"),
        ("bubble", st.bubble_ms, "#bab0ac"),
    ];
    if st.draft_ms > 0.0 {
        rows.push(("drafting", st.draft_ms, "#edc948"));
    }
    // A dense model has no expert kernels.
    rows.retain(|r| r.0 != "experts" || r.1 > 0.0);
    let bars: Vec<Bar> = rows
        .iter()
        .map(|&(name, v, color)| Bar {
            name: name.to_string(),
            value: v,
            color,
            label: format!("{v:.2} ms"),
            title: format!("{name}: {v:.3} ms"),
        })
        .collect();
    bars_svg(
        ("step", "decode step"),
        &bars,
        110.0,
        "milliseconds per decode step",
    )
}

/// One horizontal bar: its name left of the axis, its value's length and colour, the
/// value written after it, and its tooltip.
struct Bar {
    name: String,
    value: f64,
    color: &'static str,
    label: String,
    title: String,
}

/// Horizontal bars on one value axis from `x0` (the names left of it), in the given
/// order, each with its value written after it: the decode step's causes, the GPU types'
/// $ per million tokens. `id` is the chart's id and its accessible label.
fn bars_svg(id: (&str, &str), bars: &[Bar], x0: f64, axis_title: &str) -> String {
    let (x1, top, bar, gap) = (580.0, 8.0, 18.0, 8.0);
    let axis = Axis::to(bars.iter().map(|b| b.value).fold(0.0, f64::max), 6);
    let axis_y = top + bars.len() as f64 * (bar + gap);
    let mut s = Svg::new(id.0, 680.0, axis_y + 40.0, id.1);
    for (i, b) in bars.iter().enumerate() {
        let y = top + i as f64 * (bar + gap);
        let w = axis.at(b.value, x0, x1) - x0;
        s.text(0.0, y + 13.0, "start", 12.0, &b.name);
        s.rect(x0, y, w, bar, b.color, &b.title);
        s.text(x0 + w + 6.0, y + 13.0, "start", SMALL, &b.label);
    }
    s.x_axis(&axis, x0, x1, axis_y, top, axis_title);
    s.finish()
}

/// "Which GPU": one bar per priced GPU type of the what-if, in its rank order, the $ per
/// million output tokens of the cheapest layout meeting the SLOs on it; the cluster's own
/// GPU in red, a list price marked in the name. Empty when no type is priced.
fn gpus_svg(r: &ReportData) -> String {
    let bars: Vec<Bar> = r
        .gpu_choice
        .iter()
        .filter_map(|g| {
            let per_million = g.cost_per_million_output?;
            let mark = match (g.own, g.list_price) {
                (true, _) => " (this)",
                (false, true) => " (list)",
                (false, false) => "",
            };
            let price = match (&g.price_from, g.cost_per_hour) {
                (Some(from), Some(h)) => format!(", ${h:.2}/h at the list price of {from}"),
                (None, Some(h)) => format!(", ${h:.2}/h"),
                _ => String::new(),
            };
            Some(Bar {
                name: format!("{}{mark}", g.gpu),
                value: per_million,
                color: if g.own { "#e15759" } else { "#4e79a7" },
                label: format!("${per_million:.2}"),
                title: format!(
                    "{}: ${per_million:.4} per million output tokens{price}",
                    g.gpu
                ),
            })
        })
        .collect();
    if bars.is_empty() {
        return String::new();
    }
    // The names' column as wide as the widest (a long custom GPU name), within reason.
    let names = bars
        .iter()
        .map(|b| text_width(&b.name, 12.0) + 8.0)
        .fold(110.0, f64::max)
        .min(300.0);
    bars_svg(
        ("gpus", "which GPU"),
        &bars,
        names,
        "$ per million output tokens, the cheapest layout meeting every SLO",
    )
}

/// Scatter of the alternatives: TPOT (y) against $/h (x), or against TTFT when every
/// alternative costs the same per hour (or the cluster has no price), each point numbered
/// as its row in the table, this deployment's in red.
fn alternatives_svg(r: &ReportData) -> String {
    let mut prices: Vec<f64> = r
        .alternatives
        .iter()
        .filter_map(|a| a.cost_per_hour)
        .collect();
    prices.sort_by(f64::total_cmp);
    prices.dedup();
    let by_cost = prices.len() > 1 && r.alternatives.iter().all(|a| a.cost_per_hour.is_some());
    let pts: Vec<(usize, f64, f64, bool)> = r
        .alternatives
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let x = if by_cost {
                a.cost_per_hour?
            } else {
                a.ttft_ms?
            };
            Some((i + 1, x, a.tpot_ms?, a.chosen))
        })
        .collect();
    let (x0, x1, y0, y1) = (60.0, 660.0, 230.0, 30.0);
    let xa = Axis::to(pts.iter().map(|p| p.1).fold(0.0, f64::max), 6);
    let ya = Axis::to(pts.iter().map(|p| p.2).fold(0.0, f64::max), 5);
    let mut s = Svg::new("alternatives", 680.0, 275.0, "alternatives");
    s.x_axis(
        &xa,
        x0,
        x1,
        y0,
        y1,
        if by_cost {
            "$ per hour"
        } else if prices.len() == 1 && pts.len() > 1 {
            "TTFT (ms); every alternative costs the same per hour"
        } else {
            "TTFT (ms)"
        },
    );
    s.y_axis(&ya, x0, y0, y1, x1, "TPOT (ms)");
    // This deployment's point last, so that it is drawn on top and labelled first.
    let mut order: Vec<&(usize, f64, f64, bool)> = pts.iter().collect();
    order.sort_by_key(|p| !p.3);
    let place = |p: &(usize, f64, f64, bool)| (xa.at(p.1, x0, x1), ya.at(p.2, y0, y1));
    for p in order.iter().rev() {
        let (cx, cy) = place(p);
        let (radius, fill) = if p.3 {
            (6.0, "#e15759")
        } else {
            (4.0, "#4e79a7")
        };
        s.circle(cx, cy, radius, fill, &format!("#{}: {:.1} ms", p.0, p.2));
    }
    for p in &order {
        let (cx, cy) = place(p);
        let label = if p.3 {
            format!("#{} (this)", p.0)
        } else {
            format!("#{}", p.0)
        };
        s.place_label(cx, cy, &label, &AROUND, (x0, y1 - 8.0, x1 + 18.0, y0));
    }
    s.finish()
}

/// Output tokens/s per GPU (y) of the fastest single replica on 1, 2, 4 … GPUs (x, log₂),
/// each point with its value; the TPOT of each under its GPU count; the point from which
/// more GPUs make it worse in red.
fn scaling_svg(r: &ReportData) -> String {
    let (x0, x1, y0, y1) = (70.0, 660.0, 205.0, 40.0);
    let ya = Axis::to(
        r.scaling
            .iter()
            .map(|p| p.output_tokens_per_s_per_gpu)
            .fold(0.0, f64::max),
        5,
    );
    let mut s = Svg::new("scaling", 680.0, 262.0, "scaling curve");
    s.y_axis(&ya, x0, y0, y1, x1, "output tokens/s per GPU (saturated)");
    let lg = |g: u64| (g.max(1) as f64).log2();
    let (first, last) = match (r.scaling.first(), r.scaling.last()) {
        (Some(a), Some(b)) => (lg(a.gpus), lg(b.gpus)),
        _ => (0.0, 0.0),
    };
    let pad = 40.0;
    let x_of = |g: u64| {
        if last > first {
            x0 + pad + (lg(g) - first) / (last - first) * (x1 - x0 - 2.0 * pad)
        } else {
            (x0 + x1) / 2.0
        }
    };
    s.line(x0, y0, x1, y0, "#889");
    let mut path = String::new();
    for (i, p) in r.scaling.iter().enumerate() {
        let x = x_of(p.gpus);
        let y = ya.at(p.output_tokens_per_s_per_gpu, y0, y1);
        let _ = std::fmt::Write::write_fmt(
            &mut path,
            format_args!("{}{x:.1},{y:.1} ", if i == 0 { "M" } else { "L" }),
        );
        s.line(x, y0, x, y0 + 4.0, "#889");
        s.text(x, y0 + 16.0, "middle", SMALL, &p.gpus.to_string());
        s.text(
            x,
            y0 + 30.0,
            "middle",
            SMALL,
            &format!("{:.1} ms", p.tpot_ms),
        );
    }
    s.text(
        (x0 + x1) / 2.0,
        y0 + 48.0,
        "middle",
        SMALL,
        "GPUs per replica (log₂ scale) · TPOT at 8 requests in flight",
    );
    if !path.is_empty() {
        s.path(path.trim_end(), "#4e79a7");
    }
    for p in &r.scaling {
        let worse = r.worse_from_gpus.is_some_and(|g| p.gpus >= g);
        let (x, y) = (x_of(p.gpus), ya.at(p.output_tokens_per_s_per_gpu, y0, y1));
        let fill = if worse { "#e15759" } else { "#4e79a7" };
        s.circle(
            x,
            y,
            4.0,
            fill,
            &format!("{} GPUs ({}): {:.1} ms", p.gpus, p.layout, p.tpot_ms),
        );
        s.place_label(
            x,
            y,
            &num(p.output_tokens_per_s_per_gpu, 0),
            &[Side::Above, Side::Below, Side::Right, Side::Left],
            (x0, y1 - 10.0, x1 + 18.0, y0),
        );
    }
    s.finish()
}

/// The deployment as the templates and `report.json` read it: its launch plan with the
/// forecast's figures where the report has always shown them (the pair's numbers in
/// `disaggregated.pair`, the acceptance and tokens per step in `engine.speculative`,
/// and `predicted`, `price_per_hour` and `report` beside the launch facts).
fn report_view_of(d: &DeploymentPlan, f: &DeploymentForecast) -> Result<serde_json::Value, String> {
    use serde_json::{to_value, Value};
    let mut v = to_value(d).map_err(|e| e.to_string())?;
    let Value::Object(o) = &mut v else {
        return Err("a deployment serializes as an object".into());
    };
    if let (Some(Value::Object(sp)), Some(fs)) = (
        o.get_mut("engine").and_then(|e| e.get_mut("speculative")),
        &f.speculative,
    ) {
        sp.insert(
            "acceptance".into(),
            to_value(fs.acceptance).map_err(|e| e.to_string())?,
        );
        sp.insert(
            "tokens_per_step".into(),
            to_value(fs.tokens_per_step).map_err(|e| e.to_string())?,
        );
    }
    if let (Some(Value::Object(x)), Some(pair)) = (o.get_mut("disaggregated"), &f.pair) {
        x.insert("pair".into(), to_value(pair).map_err(|e| e.to_string())?);
    }
    o.insert(
        "predicted".into(),
        to_value(&f.predicted).map_err(|e| e.to_string())?,
    );
    o.insert(
        "price_per_hour".into(),
        to_value(f.price_per_hour).map_err(|e| e.to_string())?,
    );
    o.insert(
        "report".into(),
        to_value(&f.report).map_err(|e| e.to_string())?,
    );
    Ok(v)
}

/// The three report files of one deployment of `plan` and its forecast `f`, by path
/// relative to its folder.
pub fn files(
    plan: &LaunchPlan,
    d: &DeploymentPlan,
    f: &DeploymentForecast,
) -> Result<Vec<(String, String)>, String> {
    let generator = Generator {
        dic: &plan.dic_version,
        inputs: &plan.inputs,
    };
    let e = env();
    let layout = format!("{}", d.layout);
    let view = ReportView {
        ranks: &d.comm.ranks,
        data: &f.report,
    };
    let merged = report_view_of(d, f)?;
    let ctx = minijinja::context! {
        d => Value::from_serialize(&merged),
        r => Value::from_serialize(&view),
        layout => layout.clone(),
        generator => Value::from_serialize(&generator),
        memory_svg => Value::from_safe_string(memory_svg(&f.report)),
        step_svg => Value::from_safe_string(step_svg(&f.report)),
        alternatives_svg => Value::from_safe_string(alternatives_svg(&f.report)),
        scaling_svg => Value::from_safe_string(scaling_svg(&f.report)),
        gpus_svg => Value::from_safe_string(gpus_svg(&f.report)),
    };
    let md = e
        .get_template("report.md")
        .and_then(|t| t.render(&ctx))
        .map_err(|e| format!("report.md: {e}"))?;
    let html = e
        .get_template("report.html")
        .and_then(|t| t.render(&ctx))
        .map_err(|e| format!("report.html: {e}"))?;
    let json = ReportJson {
        schema: REPORT_SCHEMA,
        generator,
        deployment: &d.name,
        model: &d.model.name,
        model_source: &d.model.source,
        gpu: &d.gpu.name,
        layout,
        launch: d.launch,
        engine: &merged["engine"],
        predicted: &f.predicted,
        report: view,
    };
    let mut json = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    json.push('\n');
    let mut md = md;
    if !md.ends_with('\n') {
        md.push('\n');
    }
    let mut html = html;
    if !html.ends_with('\n') {
        html.push('\n');
    }
    Ok(vec![
        ("report.md".into(), md),
        ("report.json".into(), json),
        ("report.html".into(), html),
    ])
}
