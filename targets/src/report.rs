//! The cost report: `report.md`, `report.json` and `report.html` (one self-contained
//! page, inline SVG charts, no network), from minijinja templates embedded in the binary.
//!
//! The data comes from the IR (`DeploymentPlan::report`); this module only formats it.
//! `report.json` is the IR's report data with the deployment's identity, under a
//! `schema` version (documented in docs/report-json.md).

use dic_compiler::ir::{DeploymentPlan, ReportData};
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

#[derive(Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    deployment: &'a str,
    model: &'a str,
    model_source: &'a str,
    gpu: &'a str,
    layout: String,
    launch: dic_compiler::ir::LaunchMode,
    engine: &'a dic_compiler::ir::EnginePlan,
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

const COLORS: [(&str, &str); 6] = [
    ("weights", "#4e79a7"),
    ("activations", "#f28e2b"),
    ("non-torch", "#76b7b2"),
    ("CUDA graphs", "#b07aa1"),
    ("KV cache", "#59a14f"),
    ("free", "#d3d3d3"),
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Stacked bars, one per PP stage: weights, activations, non-torch, graphs, KV, free.
fn memory_svg(r: &ReportData) -> String {
    let width = 640.0;
    let left = 70.0;
    let bar = 22.0;
    let height = 40.0 + r.memory.len() as f64 * (bar + 10.0);
    let mut s = format!("<svg class=\"chart\" id=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"memory per GPU\">");
    for (i, m) in r.memory.iter().enumerate() {
        let y = 10.0 + i as f64 * (bar + 10.0);
        s.push_str(&format!(
            "<text x=\"0\" y=\"{:.1}\" font-size=\"12\">stage {}</text>",
            y + 15.0,
            m.stage
        ));
        let parts = [
            m.weights,
            m.activations,
            m.non_torch,
            m.cuda_graphs,
            m.kv_cache,
            m.free,
        ];
        let total: u64 = parts.iter().sum::<u64>().max(1);
        let mut x = left;
        for (p, (name, color)) in parts.iter().zip(COLORS) {
            let w = (*p as f64 / total as f64) * (width - left - 10.0);
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{bar}\" fill=\"{color}\"><title>{name}: {:.2} GiB</title></rect>",
                *p as f64 / 1073741824.0
            ));
            x += w;
        }
    }
    let ly = height - 12.0;
    for (i, (name, color)) in COLORS.iter().enumerate() {
        let x = left + i as f64 * 95.0;
        s.push_str(&format!("<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{ly:.1}\" font-size=\"11\">{name}</text>", ly - 9.0, x + 14.0));
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars: what one decode step spends its time on.
fn step_svg(r: &ReportData) -> String {
    let Some(st) = &r.step else {
        return String::new();
    };
    let rows = [
        ("compute", st.compute_ms, "#4e79a7"),
        ("memory", st.memory_ms, "#59a14f"),
        ("communication", st.communication_ms, "#e15759"),
        ("overhead", st.overhead_ms, "#9c755f"),
        ("bubble", st.bubble_ms, "#bab0ac"),
    ];
    let max = rows.iter().map(|r| r.1).fold(1e-9, f64::max);
    let mut s = String::from("<svg class=\"chart\" id=\"step\" xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"150\" role=\"img\" aria-label=\"decode step\">");
    for (i, (name, v, color)) in rows.iter().enumerate() {
        let y = 8.0 + i as f64 * 28.0;
        let w = v / max * 420.0;
        s.push_str(&format!(
            "<text x=\"0\" y=\"{:.1}\" font-size=\"12\">{name}</text><rect x=\"110\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"18\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{v:.2} ms</text>",
            y + 13.0,
            116.0 + w,
            y + 13.0
        ));
    }
    s.push_str("</svg>");
    s
}

/// Scatter of alternatives: $/h (x) against TPOT (y); the deployment's own layout marked.
fn alternatives_svg(r: &ReportData) -> String {
    let pts: Vec<(f64, f64, bool, &str)> = r
        .alternatives
        .iter()
        .filter_map(|a| {
            Some((
                a.cost_per_hour.unwrap_or(a.gpus as f64),
                a.tpot_ms?,
                a.chosen,
                a.layout.as_str(),
            ))
        })
        .collect();
    let mut s = String::from("<svg class=\"chart\" id=\"alternatives\" xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"220\" role=\"img\" aria-label=\"alternatives\">");
    s.push_str("<line x1=\"50\" y1=\"190\" x2=\"630\" y2=\"190\" stroke=\"#889\"/><line x1=\"50\" y1=\"10\" x2=\"50\" y2=\"190\" stroke=\"#889\"/>");
    s.push_str("<text x=\"560\" y=\"210\" font-size=\"11\">cost →</text><text x=\"0\" y=\"20\" font-size=\"11\">TPOT</text>");
    if let (Some(xmax), Some(ymax)) = (
        pts.iter().map(|p| p.0).reduce(f64::max),
        pts.iter().map(|p| p.1).reduce(f64::max),
    ) {
        for (x, y, chosen, label) in &pts {
            let cx = 50.0 + x / xmax.max(1e-9) * 560.0;
            let cy = 190.0 - y / ymax.max(1e-9) * 170.0;
            let (r_, fill) = if *chosen {
                (7, "#e15759")
            } else {
                (4, "#4e79a7")
            };
            s.push_str(&format!("<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r_}\" fill=\"{fill}\"><title>{}: {y:.1} ms</title></circle>", esc(label)));
        }
    }
    s.push_str("</svg>");
    s
}

/// GPUs (log₂ axis) against saturated tokens/s per GPU, TPOT as labels.
fn scaling_svg(r: &ReportData) -> String {
    let mut s = String::from("<svg class=\"chart\" id=\"scaling\" xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"220\" role=\"img\" aria-label=\"scaling curve\">");
    s.push_str("<line x1=\"50\" y1=\"190\" x2=\"630\" y2=\"190\" stroke=\"#889\"/><line x1=\"50\" y1=\"10\" x2=\"50\" y2=\"190\" stroke=\"#889\"/>");
    s.push_str("<text x=\"540\" y=\"210\" font-size=\"11\">GPUs (log₂) →</text><text x=\"0\" y=\"20\" font-size=\"11\">tok/s/GPU</text>");
    let n = r.scaling.len();
    let ymax = r
        .scaling
        .iter()
        .map(|p| p.output_tokens_per_s_per_gpu)
        .fold(1e-9, f64::max);
    let mut path = String::new();
    for (i, p) in r.scaling.iter().enumerate() {
        let x = 60.0
            + if n > 1 {
                i as f64 / (n - 1) as f64 * 540.0
            } else {
                0.0
            };
        let y = 190.0 - p.output_tokens_per_s_per_gpu / ymax * 170.0;
        path.push_str(&format!("{}{x:.1},{y:.1} ", if i == 0 { "M" } else { "L" }));
        s.push_str(&format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#4e79a7\"/><text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{} GPUs, {:.1} ms</text>",
            y - 8.0,
            p.gpus,
            p.tpot_ms
        ));
    }
    if !path.is_empty() {
        s.push_str(&format!(
            "<path d=\"{}\" fill=\"none\" stroke=\"#4e79a7\"/>",
            path.trim_end()
        ));
    }
    s.push_str("</svg>");
    s
}

/// The three report files of one deployment, by path relative to its folder.
pub fn files(d: &DeploymentPlan) -> Result<Vec<(String, String)>, String> {
    let e = env();
    let layout = format!("{}", d.layout);
    let view = ReportView {
        ranks: &d.comm.ranks,
        data: &d.report,
    };
    let ctx = minijinja::context! {
        d => Value::from_serialize(d),
        r => Value::from_serialize(&view),
        layout => layout.clone(),
        memory_svg => Value::from_safe_string(memory_svg(&d.report)),
        step_svg => Value::from_safe_string(step_svg(&d.report)),
        alternatives_svg => Value::from_safe_string(alternatives_svg(&d.report)),
        scaling_svg => Value::from_safe_string(scaling_svg(&d.report)),
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
        deployment: &d.name,
        model: &d.model.name,
        model_source: &d.model.source,
        gpu: &d.gpu.name,
        layout,
        launch: d.launch,
        engine: &d.engine,
        predicted: &d.predicted,
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
