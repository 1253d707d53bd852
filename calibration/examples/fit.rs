//! Fits the performance constants on vLLM's measured serving (../shared/calibration/
//! vllm-silicon) from the round starting values, and prints them with the objective of the
//! stored ones: `cargo run --release -p dic-calibration --example fit`. `ROWS=1` also prints
//! every row's measured TTFT and TPOT and those the fit predicts; `CV=1` also prints the
//! median and p90 |error| leaving one GPU out and leaving one model out (what errors.md
//! reports, without rewriting it), and the fitted bias per GPU and model;
//! `LOGO_GROUPS=1` with it, each cross-validation's errors per GPU and model too; `ROWS=1`
//! with `CV=1`, each row's TTFT and TPOT error in both cross-validations.
//!
//! `cargo run --release -p dic-calibration --example fit -- ROWS.csv` reads other rows of the
//! same format instead (measurements of your own, or a held-out split) and also prints
//! how the stored constants, fitted on the training split, predict them: per GPU and
//! model, and how many rows dic could not model (a model or GPU it cannot resolve, a
//! layout its memory model says does not fit). Checkpoints the stdlib does not define
//! are read from ../shared/models/hf. A file it cannot read exits 2; one without the
//! columns it needs (named) or without a complete aggregated row exits 1.
use dic_calibration::silicon::{
    cross_validate, fit_silicon, model_label, parse_silicon, predict_run, row_error,
    silicon_objective, stats, SiliconRow, SILICON_COLUMNS, START, STORED,
};

/// Prints the TTFT and TPOT statistics of one evaluation.
fn report(name: &str, errors: &[Option<(f64, f64)>]) {
    let ttft: Vec<Option<f64>> = errors.iter().map(|e| e.map(|e| e.0)).collect();
    let tpot: Vec<Option<f64>> = errors.iter().map(|e| e.map(|e| e.1)).collect();
    let (t, p) = (stats(&ttft), stats(&tpot));
    println!(
        "{name:<22} TTFT {:5.1}% (p90 {:5.1}%, bias {:+5.1}%)  TPOT {:5.1}% (p90 {:5.1}%, bias {:+5.1}%)",
        t.median_abs * 100.0,
        t.p90_abs * 100.0,
        t.bias * 100.0,
        p.median_abs * 100.0,
        p.p90_abs * 100.0,
        p.bias * 100.0
    );
}

/// The fitted errors grouped by GPU and model.
fn by_group(rows: &[SiliconRow], errors: &[Option<(f64, f64)>]) {
    let mut keys: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.gpu, model_label(r)))
        .collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let e: Vec<Option<(f64, f64)>> = rows
            .iter()
            .zip(errors)
            .filter(|(r, _)| format!("{} {}", r.gpu, model_label(r)) == k)
            .map(|(_, e)| *e)
            .collect();
        report(&k, &e);
    }
}

/// A checkpoint the stdlib does not define, from its Hugging Face config in
/// ../shared/models/hf.
fn hf_config(id: &str) -> Option<dic_compiler::program::Model> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/models/hf");
    dic_compiler::import_hf::model_from_flat_configs(id, &|file| {
        std::fs::read_to_string(format!("{dir}/{file}")).ok()
    })
}

fn main() {
    let given = std::env::args().nth(1);
    let path = given.clone().unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/calibration/vllm-silicon/vllm-silicon-train.csv"
        )
        .to_string()
    });
    let csv = match std::fs::read_to_string(&path) {
        Ok(csv) => csv,
        Err(e) if given.is_some() => {
            eprintln!("error: cannot read {path}: {e}");
            std::process::exit(2);
        }
        Err(_) => {
            eprintln!("error: {path}: not found (../shared/calibration must be present)");
            std::process::exit(2);
        }
    };
    let (rows, skipped) = parse_silicon(&csv, &hf_config);
    println!("{} rows, {skipped} skipped", rows.len());
    if rows.is_empty() {
        let header: Vec<&str> = csv.lines().next().unwrap_or("").split(',').collect();
        let missing: Vec<&str> = SILICON_COLUMNS
            .into_iter()
            .filter(|c| !header.contains(c))
            .collect();
        if missing.is_empty() {
            eprintln!("error: {path} has no complete `mode = agg` row to fit or predict");
        } else {
            eprintln!("error: {path} lacks the columns {}", missing.join(", "));
        }
        std::process::exit(1);
    }
    if given.is_some() {
        let stored: Vec<_> = rows.iter().map(|r| row_error(r, &STORED)).collect();
        let missed = stored.iter().filter(|e| e.is_none()).count();
        println!("stored constants on these rows ({missed} not modelled):");
        report("all rows", &stored);
        by_group(&rows, &stored);
    }
    let fit = fit_silicon(&rows, START);
    if std::env::var("ROWS").is_ok() {
        for r in &rows {
            let p = predict_run(r, &fit);
            println!(
                "{}: TTFT {:.1} ms TPOT {:.2} ms, predicted {:?}",
                r.id,
                r.ttft * 1e3,
                r.tpot * 1e3,
                p.map(|(t, p)| (t * 1e3, p * 1e3))
            );
        }
    }
    for (name, f) in [("stored", STORED), ("fit", fit)] {
        println!(
            "{name}: {f:?} objective {:.4}",
            silicon_objective(&rows, &f)
        );
    }
    if std::env::var("CV").is_ok() {
        let fitted: Vec<_> = rows.iter().map(|r| row_error(r, &fit)).collect();
        report("fitted", &fitted);
        let logo = cross_validate(&rows, |r| r.gpu.clone(), |t| fit_silicon(t, START));
        report("leave one GPU out", &logo);
        if std::env::var("LOGO_GROUPS").is_ok() {
            by_group(&rows, &logo);
        }
        let lomo = cross_validate(
            &rows,
            |r| model_label(r).to_string(),
            |t| fit_silicon(t, START),
        );
        report("leave one model out", &lomo);
        if std::env::var("LOGO_GROUPS").is_ok() {
            by_group(&rows, &lomo);
        }
        if std::env::var("ROWS").is_ok() {
            let pct = |e: Option<(f64, f64)>| match e {
                Some((t, p)) => format!("TTFT {:+6.1}% TPOT {:+6.1}%", t * 100.0, p * 100.0),
                None => "not modelled".to_string(),
            };
            for ((r, g), m) in rows.iter().zip(&logo).zip(&lomo) {
                println!(
                    "{}: leave one GPU out {}, leave one model out {}",
                    r.id,
                    pct(*g),
                    pct(*m)
                );
            }
        }
        println!("fitted, by GPU and model:");
        by_group(&rows, &fitted);
    }
}
