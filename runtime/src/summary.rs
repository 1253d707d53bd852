//! Turning every rank's measurements into the run's report: per schedule line the bytes,
//! the slowest rank's time, algbw and busbw (nccl-tests' definitions), and dic's predicted
//! time and busbw beside them; and the calibration fit, α and β per link class, written as
//! a `.dist` file that `dic` imports.

use crate::plan::{Collective, Plan};
use crate::replay::{CalibrationPoint, LineMeasurement, RankReport};
use dic_compiler::analysis::comm::{LINK_EFFICIENCY, NCCL_BASE_LATENCY};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LineSummary {
    pub phase: String,
    pub stage: u64,
    pub group: String,
    pub group_size: usize,
    pub collective: String,
    pub calls: u64,
    pub bytes_plan: u64,
    pub bytes_run: u64,
    /// The slowest rank's mean time of one call.
    pub measured_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub predicted_us: f64,
    /// dic's predicted bus bandwidth at the plan's size.
    pub predicted_busbw_gbps: f64,
    /// dic's prediction of one call at the size it ran, on the planned fabric (equal to
    /// `predicted_us` at `--scale 1`; absent for plans without link figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_run_us: Option<f64>,
    /// dic's model of one call at the size it ran with the α and bandwidth this run
    /// measured on the line's link (its calibration fit): like with like on any fabric,
    /// loopback included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_measured_link_us: Option<f64>,
    pub verified: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    pub deployment: String,
    pub layout: String,
    pub world_size: usize,
    pub scale: f64,
    pub lines: Vec<LineSummary>,
    /// Sum over lines of calls × slowest time, per phase, microseconds (at the run's sizes).
    pub measured_decode_us: f64,
    pub measured_prefill_us: f64,
    pub predicted_decode_us: f64,
    pub predicted_prefill_us: f64,
    /// The same sums predicted at the run's sizes (what the measured sums compare with).
    #[serde(default)]
    pub predicted_decode_run_us: f64,
    #[serde(default)]
    pub predicted_prefill_run_us: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<LinkFit>,
}

/// A measurement's collective (written by this runtime from the same enum).
fn collective(name: &str) -> Collective {
    Collective::parse(name).unwrap_or(Collective::SendRecv)
}

/// GB/s from bytes and microseconds.
fn gbps(bytes: f64, us: f64) -> f64 {
    if us > 0.0 {
        bytes / (us * 1e-6) / 1e9
    } else {
        0.0
    }
}

pub fn summarize(plan: &Plan, scale: f64, reports: &[RankReport]) -> RunSummary {
    let calibration = fit_links(
        &reports
            .iter()
            .flat_map(|r| r.calibration.iter().cloned())
            .collect::<Vec<_>>(),
    );
    // Each group's link, and the α-β this run measured on it.
    let link_of = |group: &str| {
        plan.groups
            .iter()
            .find(|g| g.name == group)
            .and_then(|g| g.link.clone())
    };
    let measured_link = |group: &str| {
        let link = link_of(group)?;
        calibration
            .iter()
            .find(|f| f.usable && f.link == link)
            .cloned()
    };
    let step_of = |phase: &str, stage: u64, line: usize| {
        let ph = if phase == crate::plan::Phase::Prefill.name() {
            crate::plan::Phase::Prefill
        } else {
            crate::plan::Phase::Decode
        };
        plan.schedule(ph)
            .stages
            .iter()
            .find(|s| s.stage == stage)
            .and_then(|s| s.steps.get(line))
            .cloned()
    };
    let mut merged: BTreeMap<(String, u64, usize), LineMeasurement> = BTreeMap::new();
    for rep in reports {
        for l in &rep.lines {
            let key = (l.phase.clone(), l.stage, l.line);
            match merged.get_mut(&key) {
                Some(m) => {
                    m.measured_us = m.measured_us.max(l.measured_us);
                    m.verified &= l.verified;
                }
                None => {
                    merged.insert(key, l.clone());
                }
            }
        }
    }
    let mut lines: Vec<LineSummary> = merged
        .into_values()
        .map(|m| {
            let c = collective(&m.collective);
            let f = c.busbw_factor(m.group_size as u64);
            let algbw = gbps(m.bytes_run as f64, m.measured_us);
            let pred_alg = gbps(m.bytes_plan as f64, m.predicted_us);
            let model_measured_link_us = match (
                measured_link(&m.group),
                step_of(&m.phase, m.stage, m.line).and_then(|s| s.fabric),
            ) {
                (Some(fit), Some(f)) => {
                    let at = crate::plan::LinkFigures {
                        link_type: f.link_type,
                        bandwidth: fit.bandwidth_gbps * 1e9,
                        latency: fit.alpha_us * 1e-6,
                    }
                    .placement(m.group_size as u64);
                    Some(
                        dic_compiler::analysis::comm::collective_time(
                            c,
                            m.bytes_run as f64,
                            m.group_size as u64,
                            &at,
                        ) * 1e6,
                    )
                }
                _ => None,
            };
            LineSummary {
                phase: m.phase,
                stage: m.stage,
                group: m.group.split('.').next().unwrap_or("").to_string(),
                group_size: m.group_size,
                collective: m.collective,
                calls: m.calls,
                bytes_plan: m.bytes_plan,
                bytes_run: m.bytes_run,
                measured_us: m.measured_us,
                algbw_gbps: algbw,
                busbw_gbps: algbw * f,
                predicted_us: m.predicted_us,
                predicted_busbw_gbps: pred_alg * f,
                predicted_run_us: m.predicted_run_us,
                model_measured_link_us,
                verified: m.verified,
            }
        })
        .collect();
    // Decode lines first, then prefill (BTreeMap ordered "decode step" < "prefill chunk").
    lines.sort_by(|a, b| (a.phase.as_str(), a.stage).cmp(&(b.phase.as_str(), b.stage)));
    let total = |phase: &str, f: &dyn Fn(&LineSummary) -> f64| -> f64 {
        lines
            .iter()
            .filter(|l| l.phase == phase)
            .map(|l| l.calls as f64 * f(l))
            .sum()
    };
    RunSummary {
        deployment: plan.deployment.clone(),
        layout: plan.layout.clone(),
        world_size: plan.world_size,
        scale,
        measured_decode_us: total("decode step", &|l| l.measured_us),
        measured_prefill_us: total("prefill chunk", &|l| l.measured_us),
        predicted_decode_us: plan.decode.predicted_us,
        predicted_prefill_us: plan.prefill.predicted_us,
        predicted_decode_run_us: total("decode step", &|l| {
            l.predicted_run_us.unwrap_or(l.predicted_us)
        }),
        predicted_prefill_run_us: total("prefill chunk", &|l| {
            l.predicted_run_us.unwrap_or(l.predicted_us)
        }),
        lines,
        calibration,
    }
}

fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// The report as a table for the terminal.
pub fn render_table(s: &RunSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "dic run: deployment {} ({}), {} ranks{}",
        s.deployment,
        s.layout,
        s.world_size,
        if s.scale != 1.0 {
            format!(", message sizes × {}", s.scale)
        } else {
            String::new()
        }
    );
    // "pred": dic's model at the size each line ran, on the planned fabric; "model@run":
    // the same model with the α and bandwidth this run measured on the line's link, when
    // the calibration sweep fitted them (like with like on any fabric, loopback included).
    let refit = s.lines.iter().any(|l| l.model_measured_link_us.is_some());
    let _ = writeln!(
        out,
        "{:<14} {:>5} {:<4} {:>3} {:<15} {:>6} {:>10} {:>11} {:>9} {:>9} {:>11} {:>11}{} {:>9}",
        "phase",
        "stage",
        "grp",
        "n",
        "collective",
        "calls",
        "bytes",
        "time (µs)",
        "algbw",
        "busbw",
        "pred (µs)",
        "pred busbw",
        if refit {
            format!(" {:>12}", "model@run")
        } else {
            String::new()
        },
        "check"
    );
    for l in &s.lines {
        let pred = l.predicted_run_us.unwrap_or(l.predicted_us);
        let f = collective(&l.collective).busbw_factor(l.group_size as u64);
        let _ = writeln!(
            out,
            "{:<14} {:>5} {:<4} {:>3} {:<15} {:>6} {:>10} {:>11.1} {:>9.3} {:>9.3} {:>11.1} {:>11.2}{} {:>9}",
            l.phase,
            l.stage,
            l.group,
            l.group_size,
            l.collective,
            l.calls,
            human_bytes(l.bytes_run),
            l.measured_us,
            l.algbw_gbps,
            l.busbw_gbps,
            pred,
            gbps(l.bytes_run as f64, pred) * f,
            match (refit, l.model_measured_link_us) {
                (false, _) => String::new(),
                (true, Some(v)) => format!(" {v:>12.1}"),
                (true, None) => format!(" {:>12}", "—"),
            },
            if l.verified { "exact" } else { "—" }
        );
    }
    let sized = if s.scale != 1.0 {
        format!(
            "predicted figures are dic's model at the sizes that ran (× {} of the plan's) on the planned fabric",
            s.scale
        )
    } else {
        "predicted figures are dic's model on the planned fabric".to_string()
    };
    let _ = writeln!(out, "bandwidths in GB/s; {sized}");
    if refit {
        let _ = writeln!(out, "model@run: the same model with the latency and bandwidth this run measured on each link (the calibration fits below), to compare on any fabric");
    }
    let _ = writeln!(
        out,
        "communication per decode step: measured {:.1} µs, predicted {:.1} µs at these sizes ({:.1} µs at the plan's); per prefill chunk: measured {:.1} µs, predicted {:.1} µs ({:.1} µs at the plan's)",
        s.measured_decode_us,
        s.predicted_decode_run_us,
        s.predicted_decode_us,
        s.measured_prefill_us,
        s.predicted_prefill_run_us,
        s.predicted_prefill_us
    );
    for f in &s.calibration {
        if !f.usable {
            let _ = writeln!(
                out,
                "calibration of {}: time did not grow with message size (noise); rerun with larger sizes (--scale)",
                f.link
            );
            continue;
        }
        let _ = writeln!(
            out,
            "calibrated {}: α = {:.2} µs, bandwidth = {:.2} GB/s (from {} on {} ranks, {} sizes, r² = {:.3})",
            f.link, f.alpha_us, f.bandwidth_gbps, f.collective, f.group_size, f.points, f.r_squared
        );
    }
    out
}

/// Measured α and β of one link class, from a least-squares fit of dic's own model of one
/// call, `t = base + steps·α + factor·S/B` (`comm::collective_time`), so the link it
/// writes reproduces the measurement when dic predicts with it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LinkFit {
    pub link: String,
    pub collective: String,
    pub group_size: usize,
    pub points: usize,
    pub alpha_us: f64,
    pub bandwidth_gbps: f64,
    pub r_squared: f64,
    /// False when time did not grow with size (noise swamped the bandwidth term): no
    /// link is written for it.
    pub usable: bool,
}

pub fn fit_links(points: &[CalibrationPoint]) -> Vec<LinkFit> {
    // The slowest rank per (link, size) — a collective is done when its last rank is.
    let mut by: BTreeMap<(String, u64), CalibrationPoint> = BTreeMap::new();
    for p in points {
        let e = by
            .entry((p.link.clone(), p.bytes))
            .or_insert_with(|| p.clone());
        e.measured_us = e.measured_us.max(p.measured_us);
    }
    let mut links: BTreeMap<String, Vec<CalibrationPoint>> = BTreeMap::new();
    for ((link, _), p) in by {
        links.entry(link).or_default().push(p);
    }
    links
        .into_iter()
        .filter(|(_, ps)| ps.len() >= 2)
        .map(|(link, ps)| {
            let n = ps.len() as f64;
            let xs: Vec<f64> = ps.iter().map(|p| p.bytes as f64).collect();
            let ys: Vec<f64> = ps.iter().map(|p| p.measured_us).collect();
            let mx = xs.iter().sum::<f64>() / n;
            let my = ys.iter().sum::<f64>() / n;
            let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
            let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
            let raw_slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
            let slope = raw_slope.max(1e-12);
            let intercept = (my - slope * mx).max(0.0);
            let ss_tot: f64 = ys.iter().map(|y| (y - my) * (y - my)).sum();
            let ss_res: f64 = xs
                .iter()
                .zip(&ys)
                .map(|(x, y)| (y - intercept - slope * x).powi(2))
                .sum();
            let c = collective(&ps[0].collective);
            let p = ps[0].group_size;
            // dic's model of one call: base + steps·α + factor·S/B (`comm::collective_time`),
            // so slope (µs per byte) = factor / B and intercept = base + steps·α.
            let bandwidth = c.bandwidth_factor(p as u64) / slope * 1e6;
            let base_us = NCCL_BASE_LATENCY * 1e6;
            LinkFit {
                link,
                collective: ps[0].collective.clone(),
                group_size: p,
                points: ps.len(),
                alpha_us: (intercept - base_us).max(0.0) / c.latency_steps(p as u64),
                bandwidth_gbps: bandwidth / 1e9,
                r_squared: if ss_tot > 0.0 {
                    1.0 - ss_res / ss_tot
                } else {
                    1.0
                },
                usable: raw_slope > 0.0,
            }
        })
        .collect()
}

/// The `.dist` file `--calibrate` writes: one `link measured_<name> = <name>` per fitted
/// link class, with the measured latency and the bandwidth that dic's model (which
/// applies `link_efficiency` to a link's bandwidth) turns back into the measured figure.
pub fn calibration_dist(plan: &Plan, fits: &[LinkFit]) -> String {
    let link_efficiency = LINK_EFFICIENCY;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Measured by `dic run --calibrate` for deployment {} ({}, {} ranks).",
        plan.deployment, plan.layout, plan.world_size
    );
    let _ = writeln!(
        out,
        "// Import this file and use these links in your node or cluster to predict with the measured fabric."
    );
    out.push_str("import std.links.*\n");
    for f in fits {
        if !f.usable {
            let _ = writeln!(
                out,
                "\n// {}: no fit (time did not grow with message size)",
                f.link
            );
            continue;
        }
        let name: String = f
            .link
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "// {} on {} ranks, {} sizes, r² = {:.3}; measured bus bandwidth {:.3} GB/s",
            f.collective, f.group_size, f.points, f.r_squared, f.bandwidth_gbps
        );
        let _ = writeln!(out, "link measured_{name} = {} {{", f.link);
        let _ = writeln!(
            out,
            "  bandwidth = {} GB/s",
            trim(f.bandwidth_gbps / link_efficiency)
        );
        let _ = writeln!(out, "  latency = {} us", trim(f.alpha_us));
        let _ = writeln!(out, "}}");
    }
    out
}

fn trim(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_alpha_and_bandwidth() {
        // Data made by dic's own model (base + steps·α + factor·S/B), α = 2 µs,
        // B = 10 GB/s: ring AllReduce on 4 ranks, and All-to-All on 2 ranks, where the
        // model's bandwidth factor (1) differs from nccl-tests' busbw factor (1/2).
        for (collective, p) in [(Collective::AllReduce, 4usize), (Collective::AllToAll, 2)] {
            let points: Vec<CalibrationPoint> = [1u64 << 12, 1 << 16, 1 << 20, 1 << 24]
                .iter()
                .map(|&b| CalibrationPoint {
                    link: "nvlink4".into(),
                    group: "tp.0".into(),
                    group_size: p,
                    collective: collective.name().into(),
                    bytes: b,
                    measured_us: (NCCL_BASE_LATENCY
                        + collective.alpha_beta(b as f64, p as u64, 2e-6, 10e9))
                        * 1e6,
                })
                .collect();
            let fit = &fit_links(&points)[0];
            assert!((fit.alpha_us - 2.0).abs() < 1e-6, "{fit:?}");
            assert!((fit.bandwidth_gbps - 10.0).abs() < 1e-6, "{fit:?}");
            assert!(fit.r_squared > 0.999_999);
        }
    }
}
