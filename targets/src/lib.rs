//! dic's code generators: the planned deployment (the IR, `dic_compiler::ir::Plan`) in,
//! files out. Targets read only the IR; their output is byte-for-byte deterministic
//! (sorted maps, fixed field order).
//!
//! - [`vllm`]: `vllm serve` command lines per node (`commands.json`, `node-N.sh`)
//! - [`k8s`]: Kubernetes manifests (Deployment or LeaderWorkerSet, Service, PDB)
//! - [`nccl`]: the NCCL runtime's plan (`nccl/plan.toml`)
//! - [`report`]: the cost report (`report.md`, `report.json`, `report.html`)
//! - [`shell`]: quoting for everything that lands in a script

pub mod k8s;
pub mod nccl;
pub mod report;
pub mod shell;
pub mod vllm;
pub mod yaml;

use dic_compiler::ir::Plan;
use std::collections::BTreeMap;

/// Every generated file, by path relative to the output folder (`D/vllm/node-0.sh`, …).
pub fn render(plan: &Plan) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for d in &plan.deployments {
        for (path, text) in vllm::files(d) {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in k8s::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in nccl::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in report::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
    }
    Ok(out)
}
