//! dic's code generators: the IR (`dic_compiler::ir`: the launch plan, and the forecast
//! for the report) in, files out. Targets read only the IR; their output is byte-for-byte deterministic
//! (sorted maps, fixed field order).
//!
//! - [`vllm`]: `vllm serve` command lines per node (`commands.json`, `node-N.sh`)
//! - [`k8s`]: Kubernetes manifests (Deployment or LeaderWorkerSet, Service, PDB)
//! - [`nccl`]: the NCCL runtime's plan (`nccl/plan.toml`)
//! - [`pd_router`]: the router of a disaggregated deployment (vllm-router + `pd_front.py`)
//! - [`report`]: the cost report (`report.md`, `report.json`, `report.html`)
//! - [`shell`]: quoting for everything that lands in a script

pub mod chart;
pub mod k8s;
pub mod nccl;
pub mod pd_router;
pub mod report;
pub mod shell;
pub mod vllm;
pub mod yaml;

use dic_compiler::ir::{Forecast, LaunchPlan};
use std::collections::BTreeMap;

/// Every generated file, by path relative to the output folder (`D/vllm/node-0.sh`, …):
/// the launch files from the launch plan, the report from the launch plan and the
/// forecast. Each deployment's values are re-checked first
/// ([`DeploymentPlan::check_outputs_safe`](dic_compiler::ir::DeploymentPlan::check_outputs_safe)).
pub fn render(plan: &LaunchPlan, forecast: &Forecast) -> Result<BTreeMap<String, String>, String> {
    let mut out = render_launch(plan)?;
    for d in &plan.deployments {
        let f = forecast
            .of(&d.name)
            .ok_or_else(|| format!("deployment `{}`: no forecast", d.name))?;
        for (path, text) in
            report::files(plan, d, f).map_err(|e| format!("deployment `{}`: {e}", d.name))?
        {
            out.insert(format!("{}/{path}", d.name), text);
        }
    }
    Ok(out)
}

/// The launch files alone (vLLM, Kubernetes, NCCL), from the launch plan alone: what the
/// snapshot tests render from the frozen plans in `tests/fixtures/launch/`.
pub fn render_launch(plan: &LaunchPlan) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for d in &plan.deployments {
        d.check_outputs_safe()
            .map_err(|e| format!("deployment `{}`: {e}", d.name))?;
        for (path, text) in vllm::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in k8s::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in nccl::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
    }
    Ok(out)
}
