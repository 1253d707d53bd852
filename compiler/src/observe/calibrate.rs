//! `dic observe --calibrate`: correction factors fitted on the deployment's own engines.
//!
//! Two factors, each the measured time over dic's prediction at the measured load:
//! - `step_time`: the decode step (vLLM's `request_time_per_output_token_seconds`, the
//!   mean over the window, against the predicted TPOT);
//! - `prefill_time`: a prompt's own prefill (`request_prefill_time_seconds`, from its
//!   first scheduled step to its first token, against the predicted prefill steps).
//!
//! The model multiplies the step and the prefill by them ([`Calibration`]), so a factor
//! moves the batch the load settles at too: the fit is repeated at the new operating point
//! until it holds (three rounds reach < 1%). A factor outside [0.5, 2] is refused: that
//! far from the model is evidence of a setup that is not the file's (another GPU clock,
//! another vLLM release, a different model revision), not of a model error to absorb.

use super::{measured_workload, repredict, Observation};
use crate::analysis::Calibration;
use crate::driver::Decided;
use serde::Serialize;

/// The range a fitted factor must fall in.
pub const RANGE: (f64, f64) = (0.5, 2.0);
const ROUNDS: usize = 3;

/// The fitted factors, and the figures they came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fitted {
    pub calibration: Calibration,
    /// Mean TPOT measured and predicted with the factors (seconds).
    pub tpot_measured: Option<f64>,
    pub tpot_predicted: Option<f64>,
    /// Mean prefill time measured and predicted with the factors (seconds).
    pub prefill_measured: Option<f64>,
    pub prefill_predicted: Option<f64>,
}

/// Why no factors were fitted.
#[derive(Debug, Clone, PartialEq)]
pub enum CalibrateError {
    /// Too few requests in the window, or no prediction to compare with.
    NoEvidence(String),
    /// A factor outside [`RANGE`]: (which, value).
    OutOfRange(&'static str, f64),
}

/// Fits the factors of `d` from the window.
pub fn calibrate(d: &Decided, obs: &Observation) -> Result<Fitted, CalibrateError> {
    let w = &obs.window;
    let m = measured_workload(w, obs.seconds);
    let min = super::tolerance::MIN_REQUESTS;
    let mean = |name: &str| {
        w.histogram(name)
            .filter(|h| h.count >= min)
            .and_then(|h| h.mean())
    };
    let tpot = mean(super::names::TPOT);
    let prefill = mean(super::names::PREFILL_TIME);
    if tpot.is_none() && prefill.is_none() {
        return Err(CalibrateError::NoEvidence(format!(
            "the window holds fewer than {min:.0} finished requests with TPOT or prefill times"
        )));
    }
    let mut ds = d.scenario.clone();
    let mut cal = Calibration::default();
    let mut last = (None, None);
    for _ in 0..ROUNDS {
        set(&mut ds, cal);
        let p = repredict(&ds, &m).ok_or_else(|| {
            CalibrateError::NoEvidence("dic predicts nothing at the measured load".into())
        })?;
        last = (Some(p.tpot), Some(p.ttft_parts.prefill));
        if let (Some(t), true) = (tpot, p.tpot > 0.0) {
            cal.step_time *= t / p.tpot;
        }
        if let (Some(t), true) = (prefill, p.ttft_parts.prefill > 0.0) {
            cal.prefill_time *= t / p.ttft_parts.prefill;
        }
    }
    for (which, v) in [
        ("step_time", cal.step_time),
        ("prefill_time", cal.prefill_time),
    ] {
        if !(RANGE.0..=RANGE.1).contains(&v) {
            return Err(CalibrateError::OutOfRange(which, v));
        }
    }
    set(&mut ds, cal);
    if let Some(p) = repredict(&ds, &m) {
        last = (Some(p.tpot), Some(p.ttft_parts.prefill));
    }
    Ok(Fitted {
        calibration: cal,
        tpot_measured: tpot,
        tpot_predicted: last.0.filter(|_| tpot.is_some()),
        prefill_measured: prefill,
        prefill_predicted: last.1.filter(|_| prefill.is_some()),
    })
}

fn set(ds: &mut crate::analysis::DeploymentScenario, cal: Calibration) {
    ds.scenario.engine.calibration = cal;
    if let Some(part) = ds.pool.as_mut() {
        part.peer.engine.calibration = cal;
    }
}

/// E1002: a fitted factor outside [`RANGE`], at the deployment.
pub fn out_of_range(
    program: &crate::program::Program,
    ds: &crate::analysis::DeploymentScenario,
    which: &str,
    v: f64,
) -> crate::diagnostics::Diagnostic {
    let mut diag = crate::diagnostics::Diagnostic::new(
        crate::diagnostics::Code::CalibrationOutOfRange,
        format!(
            "deploy `{}`: the fitted {which} factor is {v:.2}×, outside {}–{}; not written",
            ds.name, RANGE.0, RANGE.1
        ),
    )
    .help("that far from the model is a setup that is not the file's: check the GPU, the vLLM release, the model revision and the engine options the pods really run");
    if let Some(at) = program.def(ds.deploy).map(|x| x.location()) {
        diag = diag.primary(at.file, at.span, "calibrated deployment");
    }
    diag
}

/// The value of the deployment's `calibration = { … }` as `--calibrate` writes it.
pub fn block_value(cal: Calibration) -> String {
    format!(
        "{{ step_time = {:.3}, prefill_time = {:.3} }}",
        cal.step_time, cal.prefill_time
    )
}
