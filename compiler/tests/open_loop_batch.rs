//! The open loop's steady decode batch (`perf::steady_batch`): at every rate below
//! saturation the predicted batch is Little's law's fixed point, `running = rate per
//! replica × output × TPOT`, to a thousandth of a sequence — near saturation too, where
//! the damped iteration it replaced stopped short after 60 rounds (a quarter of a 64-GPU
//! plan's predictions did).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::memory::memory;
use dic_compiler::analysis::perf::{predict, FITTED};
use dic_compiler::program::Layout;

fn at_rate(rate: f64) -> (f64, f64, f64, bool) {
    let req = EstimateRequest {
        gpu: "h100".into(),
        layout: Layout {
            tp: 2,
            ..Layout::default()
        },
        weights: Some("fp8".into()),
        max_model_len: Some(8192.0),
        isl: Some(2000.0),
        osl: Some(500.0),
        rate: Some(rate),
        ..EstimateRequest::default()
    };
    let model = "llama_3_1_70b";
    let s = estimate::scenario(model, catalog::model(model).unwrap(), &req).unwrap();
    let p = predict(&s, &memory(&s), &FITTED);
    (
        p.running,
        p.step.tpot,
        p.max_output_tokens_per_s,
        p.overloaded,
    )
}

#[test]
fn the_batch_is_littles_fixed_point_up_to_saturation() {
    let (_, _, saturated_tps, _) = at_rate(0.01);
    let saturated_rps = saturated_tps / 500.0;
    let mut last = 0.0;
    for share in [0.05, 0.3, 0.6, 0.9, 0.97, 0.99, 0.995] {
        let rate = share * saturated_rps;
        let (running, tpot, _, overloaded) = at_rate(rate);
        assert!(!overloaded, "{share} of saturation is not overloaded");
        let sustained = rate * 500.0 * tpot;
        assert!(
            (running - sustained).abs() <= 1e-3,
            "at {share} of saturation: batch {running:.4} against Little's {sustained:.4}"
        );
        assert!(running > last, "the batch grows with the rate");
        last = running;
    }
}
