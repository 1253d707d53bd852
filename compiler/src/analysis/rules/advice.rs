//! Advice on a working deployment: "more GPUs make it worse", and the escalation order
//! (A0401, A0501, W0404).

use super::memory_rules::fits;
use super::*;

/// "More GPUs make it worse": a smaller layout that is faster per token or serves more
/// per GPU, named with its numbers.
pub(super) fn more_gpus_worse(s: &Scenario, p: &Prediction) -> Vec<Finding> {
    let l = s.layout;
    let mut candidates: Vec<Layout> = Vec::new();
    if l.tp > 1 && l.tp.is_multiple_of(2) {
        candidates.push(Layout { tp: l.tp / 2, ..l });
    }
    if l.pp > 1 {
        candidates.push(Layout { pp: l.pp - 1, ..l });
    }
    for c in candidates {
        let mut v = s.clone();
        v.layout = c;
        if !structural(&v).iter().all(|f| f.severity != Severity::Error) {
            continue;
        }
        let mem = memory(&v);
        if !(mem.stages.iter().all(|st| st.kv_cache > 0.0)
            && mem.kv_cache_tokens >= v.engine.max_model_len)
        {
            continue;
        }
        let q = predict(&v, &mem, &FITTED);
        // Compare like with like: both must carry the offered load.
        if q.overloaded || p.overloaded {
            continue;
        }
        if q.tpot < p.tpot * 0.98 {
            return vec![finding(
                Code::MoreGpusWorse,
                Anchor::Layout,
                format!(
                    "more GPUs make it worse: `{}` ({} GPUs) predicts TPOT {:.1} ms, `{}` ({} GPUs) {:.1} ms",
                    c,
                    c.gpus(),
                    q.tpot * 1e3,
                    l,
                    l.gpus(),
                    p.tpot * 1e3
                ),
                "the extra GPUs add communication faster than they remove work",
                Some(format!("use `{c}` and spend the freed GPUs on dp replicas")),
            )];
        }
    }
    Vec::new()
}

/// Advice in the escalation order: quantization would fit on fewer GPUs; DP replicas
/// would beat a wider TP for throughput.
pub fn advice(s: &Scenario, p: &Prediction) -> Vec<Finding> {
    let mut out = Vec::new();
    let l = s.layout;
    let bf16 = matches!(s.model.weights.as_str(), "bf16" | "fp16" | "fp32");
    let has_fp8 = s.topology.gpu.fp8.is_some();
    if bf16 && has_fp8 && l.tp > 1 && l.tp.is_multiple_of(2) {
        let mut q = s.clone();
        q.model.weights = "fp8".into();
        q.layout.tp = l.tp / 2;
        if structural(&q).iter().all(|f| f.severity != Severity::Error) && fits(&q) {
            out.push(finding(
                Code::QuantizeToFit,
                Anchor::Model,
                format!(
                    "with FP8 weights the model fits on tp {} ({} GPUs instead of {})",
                    l.tp / 2,
                    q.layout.gpus(),
                    l.gpus()
                ),
                "quantization comes first in the escalation order",
                Some(
                    "set `weights = fp8` on the model and halve tp (check quality for your task)"
                        .into(),
                ),
            ));
        }
    }
    if l.tp > 1 && l.tp.is_multiple_of(2) && s.model.heads.is_multiple_of(l.tp / 2) {
        let mut d = s.clone();
        d.layout.tp = l.tp / 2;
        d.layout.dp = l.dp * 2;
        if structural(&d).iter().all(|f| f.severity != Severity::Error) && fits(&d) {
            let dm = memory(&d);
            let (prompt, output) = s
                .workload
                .map(|w| (w.prompt, w.output))
                .unwrap_or((1024.0, 256.0));
            let (dt, _) = max_throughput(&d, &dm, prompt, output, &FITTED);
            if dt > p.max_output_tokens_per_s * 1.1 {
                out.push(finding(
                    Code::DpBeatsTp,
                    Anchor::Layout,
                    format!(
                        "`{}` would serve {:.0} tokens/s saturated, {:.0}% more than `{}` ({:.0} tokens/s) on the same GPUs",
                        d.layout,
                        dt,
                        (dt / p.max_output_tokens_per_s - 1.0) * 100.0,
                        l,
                        p.max_output_tokens_per_s
                    ),
                    "DP replicas need no per-token communication",
                    Some(format!("use `{}` unless TPOT needs the wider TP", d.layout)),
                ));
            }
        }
    }
    let _ = GIB;
    out
}
