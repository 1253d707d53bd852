//! `dic list gpus|models|links|instances [--json]`: the stdlib catalog as a table or JSON.

use dic::exit::OK as EXIT_OK;
use dic_compiler::architecture;
use dic_compiler::program::{Body, Program};
use serde_json::{json, Value};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Catalog {
    Gpus,
    Models,
    Links,
    Instances,
}

const GIB: f64 = 1073741824.0;

pub fn run(what: Catalog, as_json: bool) -> u8 {
    let checked = dic_compiler::driver::check_stdlib();
    let rows = rows(&checked.program, &checked.db, what);
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&Value::Array(rows)).unwrap_or_default()
        );
        return EXIT_OK;
    }
    let Some(first) = rows.first().and_then(Value::as_object) else {
        return EXIT_OK;
    };
    let headers: Vec<String> = first.keys().cloned().collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            headers
                .iter()
                .map(|h| match &r[h] {
                    Value::String(s) => s.clone(),
                    Value::Null => "—".into(),
                    v => v.to_string(),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |vals: &[String]| {
        vals.iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    println!("{}", line(&headers));
    for c in &cells {
        println!("{}", line(c));
    }
    EXIT_OK
}

fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}

/// Rows in a stable order: the order of definition in the stdlib files. Keys are sorted
/// by serde_json, so names carry a sortable prefix-free form.
fn rows(p: &Program, db: &dic_compiler::source::SourceDb, what: Catalog) -> Vec<Value> {
    let mut out = Vec::new();
    for d in p.defs.iter().flatten() {
        let module = db.get(d.file).name.clone();
        match (&d.body, what) {
            (Body::Gpu(g), Catalog::Gpus) => out.push(json!({
                "name": d.name,
                "memory_gib": round(g.memory / GIB, 1),
                "hbm_tb_s": round(g.memory_bandwidth / 1e12, 3),
                "bf16_tflops": round(g.bf16 / 1e12, 0),
                "fp8_tflops": g.fp8.map(|v| round(v / 1e12, 0)),
                "scale_up": g.scale_up.and_then(|l| p.def(l)).map(|l| l.name.clone()),
                "nvidia_smi": g.names.first().cloned(),
            })),
            (Body::Model(m), Catalog::Models) => {
                let params = architecture::parameters(m);
                out.push(json!({
                    "name": d.name,
                    "params_b": round(m.parameters / 1e9, 1),
                    "active_b": round(params.active / 1e9, 1),
                    "layers": m.layers,
                    "hidden": m.hidden,
                    "heads_kv": format!("{}/{}", m.heads, m.kv_heads),
                    "experts": if m.experts > 0 { format!("{} top-{}", m.experts, m.experts_per_token) } else { "dense".into() },
                    "attention": format!("{:?}", m.attention).to_lowercase(),
                    "weights": m.weights,
                }))
            }
            (Body::Link(l), Catalog::Links) => out.push(json!({
                "name": d.name,
                "type": l.link_type,
                "gb_s_per_direction": round(l.bandwidth / 1e9, 1),
                "latency_us": round(l.latency * 1e6, 2),
                "generation": l.generation,
            })),
            (Body::Node(n), Catalog::Instances) => out.push(json!({
                "name": d.name,
                "module": module.trim_start_matches("std/").trim_end_matches(".dist"),
                "gpus": format!("{} × {}", n.gpu_count, n.gpu.and_then(|id| p.def(id)).map(|g| g.name.as_str()).unwrap_or("?")),
                "scale_up": n.scale_up.and_then(|l| p.def(l)).map(|l| l.name.clone()).unwrap_or_else(|| "pcie".into()),
                "nics": n.nics.map(|(c, l)| format!("{c} × {}", p.def(l).map(|l| l.name.as_str()).unwrap_or("?"))),
                "price_per_h": n.price.map(|v| format!("${v:.2}")),
            })),
            _ => {}
        }
    }
    out
}
