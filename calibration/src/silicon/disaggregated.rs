//! vLLM's disaggregated rows (prefill and decode pools measured together): parsed, each
//! predicted by the disaggregated model with the stored constants, and tabled for
//! `calibration/errors.md`. They are compared, never fitted.

use super::{dp_ranks, model_label, recipe_of, resolve_checkpoint, scenario, SiliconRow};
use crate::split_csv;
use dic_compiler::analysis::disagg::{self, PoolSplit};
use dic_compiler::analysis::perf::FITTED;
use dic_compiler::program::{Layout, Model};

/// One disaggregated row: the prefill and decode pools as measured, closed loop with the
/// row's decode batch in flight: `decode_batch_size` per DP rank where the decode engine's
/// attention is data-parallel (`decode_attention_dp_size` > 1, as the split's README
/// says of `batch_size`), and across the decode pool's workers.
#[derive(Debug, Clone)]
pub struct DisaggRow {
    /// The row as an aggregated one (model, GPU, formats, lengths) for the scenario.
    pub base: SiliconRow,
    pub split: PoolSplit,
    /// Requests in flight (the decode pool's batch).
    pub concurrency: u64,
}

/// Parses the disaggregated rows (`mode = disagg`); `configs` as for [`parse_silicon`].
pub fn parse_disagg(csv: &str, configs: &dyn Fn(&str) -> Option<Model>) -> Vec<DisaggRow> {
    let table = split_csv(csv);
    let Some(header) = table.first() else {
        return Vec::new();
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let mut out = Vec::new();
    for r in table.iter().skip(1) {
        let get = |name: &str| col(name).and_then(|i| r.get(i)).map(|v| v.trim());
        let num = |name: &str| get(name).and_then(|v| v.parse::<f64>().ok());
        if get("mode") != Some("disagg") {
            continue;
        }
        let (Some(isl), Some(osl), Some(ttft), Some(tpot)) = (
            num("isl"),
            num("osl"),
            num("silicon_ttft_ms"),
            num("silicon_tpot_ms"),
        ) else {
            continue;
        };
        let pool = |p: &str| {
            let tp = num(&format!("{p}_tp_size")).unwrap_or(1.0).max(1.0) as u64;
            let dp = dp_ranks(
                tp as f64,
                num(&format!("{p}_attention_dp_size")),
                num(&format!("{p}_moe_tp_size")),
                num(&format!("{p}_moe_ep_size")),
            );
            let workers = num(&format!("{p}_num_workers")).unwrap_or(1.0).max(1.0) as u64;
            (
                Layout {
                    tp,
                    dp,
                    ep: dp > 1,
                    ..Layout::default()
                },
                workers,
            )
        };
        let ((prefill, x), (decode, y)) = (pool("prefill"), pool("decode"));
        // The requests in flight: the decode batch per DP rank of the decode engine.
        let concurrency = (num("decode_batch_size").unwrap_or(1.0).max(1.0)
            * num("decode_attention_dp_size").unwrap_or(1.0).max(1.0))
            as u64;
        let base = SiliconRow {
            id: get("id").unwrap_or_default().to_string(),
            model: get("model_path").unwrap_or_default().to_string(),
            checkpoint: resolve_checkpoint(get("model_path").unwrap_or_default(), configs),
            gpu: get("system").unwrap_or_default().to_string(),
            weights: get("gemm_quant_mode")
                .filter(|q| !q.is_empty())
                .map(str::to_string),
            expert_weights: get("moe_quant_mode")
                .filter(|q| !q.is_empty())
                .map(str::to_string),
            isl,
            osl,
            concurrency,
            tp: decode.tp,
            pp: 1,
            dp: decode.dp,
            ep: decode.ep,
            one_engine: false,
            recipe: recipe_of(get("backend_version"), get("measured_with")),
            ttft: ttft * 1e-3,
            tpot: tpot * 1e-3,
        };
        out.push(DisaggRow {
            base,
            split: PoolSplit {
                prefill,
                prefill_replicas: x,
                decode,
                decode_replicas: y,
            },
            concurrency,
        });
    }
    out
}

/// dic's disaggregated prediction of a row: (TTFT, TPOT) in seconds.
pub fn predict_disagg(r: &DisaggRow) -> Option<(f64, f64)> {
    let mut s = scenario(&r.base)?;
    let gpus = r.split.gpus();
    s.topology.gpus_per_node = gpus.max(8);
    s.topology.scale_up_domain = gpus.max(8);
    let p = disagg::predict(&s, &r.split, &FITTED)?;
    Some((p.prediction.ttft, p.prediction.tpot))
}

/// The disaggregated rows against dic's prediction, as a Markdown table.
pub fn disagg_table(rows: &[DisaggRow]) -> String {
    let mut out = String::from(
        "## Disaggregated prefill/decode (vllm-silicon, `mode = disagg`)\n\n\
Pools as measured (prefill and decode engines, TP and attention DP each), closed loop with the\n\
decode batch in flight: per DP rank where the decode engine's attention is data-parallel (as the\n\
split's README says of `batch_size`), and across the decode pool's workers (per worker it would\n\
not fit the KV cache of row 3); dic's `analysis::disagg`, nothing fitted on these rows.\n\n\
| row | model | GPU | pools | in flight | TTFT ms (measured / dic / error) | TPOT ms (measured / dic / error) |\n\
|---|---|---|---|---:|---|---|\n",
    );
    for (i, r) in rows.iter().enumerate() {
        let pools = format!(
            "{}P (tp {} × dp {}) + {}D (tp {} × dp {})",
            r.split.prefill_replicas,
            r.split.prefill.tp,
            r.split.prefill.dp,
            r.split.decode_replicas,
            r.split.decode.tp,
            r.split.decode.dp
        );
        let cell = |m: f64, p: Option<f64>| match p {
            Some(p) if p.is_finite() => {
                format!(
                    "{:.1} / {:.1} / {:+.0}%",
                    m * 1e3,
                    p * 1e3,
                    (p / m - 1.0) * 100.0
                )
            }
            _ => format!("{:.1} / — / —", m * 1e3),
        };
        let p = predict_disagg(r);
        out.push_str(&format!(
            "| {} | {} | {} | {pools} | {} | {} | {} |\n",
            i + 1,
            model_label(&r.base),
            r.base.gpu,
            r.concurrency,
            cell(r.base.ttft, p.map(|x| x.0)),
            cell(r.base.tpot, p.map(|x| x.1)),
        ));
    }
    out.push_str(DECODE_POOL_KNOWN);
    out
}

/// What these rows say about the decode pool's TPOT (issue 40), worked from the rows'
/// own shapes; no term is fitted on them.
const DECODE_POOL_KNOWN: &str = "\nWhat is known about the decode pool. It runs dic's \
aggregated step model on decode-only steps, so its error is the step model's where the rows \
are comparable, and these three rows do not identify anything beyond it. Row 3's decode \
engines (TP 4, 112 requests each at 4,000 prompt tokens and up to 1,000 out, so about 4,500 \
tokens of context on average) measured 8.7 ms per token. A TP-4 rank of Qwen3-32B reads, per \
step, 8.2 GB of FP8 weights and 112 × 4,500 × 64 KiB = 33.0 GB of KV cache in the bf16 vLLM \
keeps unless told otherwise: 12.3 ms at the H100's full 3.35 TB/s, above what was measured; \
with an FP8 cache, 7.4 ms. The row is possible only near peak bandwidth with an FP8 cache and \
no step overhead, or with less context than it states. The same sweep's aggregated FP8 rows \
of Qwen3-32B at 4000 × 1000 (the `c_tp…` ids; prompt 4000 in the dense table) are \
over-predicted alike, while the family's 90 other rows are within a few per cent. Rows 1–2 \
(Qwen3-235B-A22B, whose aggregated rows dic under-predicts) come out over-predicted here: \
with three rows from two sweeps, opposite signs and no row that measures a pool alone, the \
decode pool's TPOT stays dic's least-identified figure, and `docs/pd-decisions.md` says so \
where it matters, the long-prompt verdicts.\n";

#[cfg(test)]
mod tests {
    use super::*;

    /// Row 2's pools as the split writes them: 2 prefill engines of TP 1 × DP 4 and one
    /// decode engine of TP 1 × DP 8 with 7 requests per DP rank, 56 in flight.
    #[test]
    fn the_decode_batch_is_per_dp_rank_of_the_decode_engine() {
        let csv = "id,backend_version,model_path,system,mode,isl,osl,gemm_quant_mode,moe_quant_mode,\
prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,\
prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,\
decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,\
silicon_tpot_ms\n\
r2,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h100_sxm,disagg,4000,1000,fp8,fp8,1,2,1,1,4,0,0,7,1,1,1,8,0,0,1271.4,20.1\n\
r1,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h100_sxm,disagg,4000,1000,fp8,fp8,1,1,1,1,4,0,0,24,3,4,1,1,0,0,898.3,11.4\n";
        let rows = parse_disagg(csv, &|_| None);
        let got: Vec<(u64, u64, u64, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r.concurrency,
                    r.split.decode.dp,
                    r.split.decode_replicas,
                    r.split.prefill.dp,
                )
            })
            .collect();
        assert_eq!(got, [(56, 8, 1, 4), (24, 1, 3, 4)]);
    }
}
