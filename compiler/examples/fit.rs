//! Fits the performance constants on vLLM's measured serving (../shared/calibration/
//! vllm-silicon) from the round starting values, and prints them with the objective of the
//! stored ones: `cargo run --release -p dic-compiler --example fit`. `ROWS=1` also prints
//! every row's measured and predicted TTFT and TPOT.
use dic_compiler::analysis::calibration::silicon::{
    fit_silicon, parse_silicon, predict_run, silicon_objective, START, STORED,
};

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/calibration/vllm-silicon/vllm-silicon-train.csv"
    );
    let Ok(csv) = std::fs::read_to_string(path) else {
        eprintln!("{path}: not found (../shared/calibration must be present)");
        std::process::exit(1);
    };
    let (rows, skipped) = parse_silicon(&csv);
    println!("{} rows, {skipped} skipped", rows.len());
    if std::env::var("ROWS").is_ok() {
        for r in &rows {
            let p = predict_run(r, &STORED);
            println!(
                "{}: TTFT {:.1} ms TPOT {:.2} ms, predicted {:?}",
                r.id,
                r.ttft * 1e3,
                r.tpot * 1e3,
                p.map(|(t, p)| (t * 1e3, p * 1e3))
            );
        }
    }
    let fit = fit_silicon(&rows, START);
    for (name, f) in [("stored", STORED), ("fit", fit)] {
        println!(
            "{name}: {f:?} objective {:.4}",
            silicon_objective(&rows, &f)
        );
    }
}
