//! Fits the performance constants on ../shared/calibration and prints them with the
//! error summary: `cargo run --release -p dic-compiler --example fit`.
use dic_compiler::analysis::calibration::{fit, objective, parse_rows, summary, Metric};
use dic_compiler::analysis::perf::FITTED;

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/calibration/trtllm-0.17-throughput-a100-h100-l40s.csv"
    );
    let csv = std::fs::read_to_string(path).expect("../shared/calibration present");
    let (rows, skipped) = parse_rows(&csv);
    println!("{} rows, {skipped} skipped", rows.len());
    if std::env::var("ROWS").is_ok() {
        for r in &rows {
            let p = dic_compiler::analysis::calibration::predict_row(r, &FITTED);
            println!(
                "{} {:?} {} {} tp{} {} {}/{} rate {:?}: measured {:.1} predicted {:?}",
                r.id, r.metric, r.model, r.gpu, r.tp, r.precision, r.isl, r.osl, r.rate, r.value, p
            );
        }
    }
    for (name, c) in [("stored", FITTED), ("fit", fit(&rows))] {
        println!("{name}: {c:?} objective {:.4}", objective(&rows, &c));
        for m in [
            Metric::MaxOutputThroughput,
            Metric::OnlineOutputThroughput,
            Metric::MeanTtft,
            Metric::MeanItl,
        ] {
            let (med, worst, n) = summary(&rows, &c, m);
            println!(
                "  {m:?}: n={n} median {:.1}% worst {:.1}%",
                med * 100.0,
                worst * 100.0
            );
        }
    }
}

#[allow(dead_code)]
fn unused() {}
