//! dic's code generators: the planned deployment (the IR, `dic_compiler::ir::Plan`) in,
//! files out. Targets read only the IR; their output is byte-for-byte deterministic
//! (sorted maps, fixed field order).
//!
//! - [`vllm`]: `vllm serve` command lines per node (`commands.json`, `node-N.sh`)
//! - [`k8s`]: Kubernetes manifests (Deployment or LeaderWorkerSet, Service, PDB)
//! - [`nccl`]: the NCCL runtime's plan (`nccl/plan.toml`)
//! - [`report`]: the cost report (`report.md`, `report.json`, `report.html`)
//! - [`shell`]: quoting for everything that lands in a script

pub mod chart;
pub mod k8s;
pub mod nccl;
pub mod report;
pub mod shell;
pub mod vllm;
pub mod yaml;

use dic_compiler::ir::{DeploymentPlan, Plan};
use std::collections::BTreeMap;

/// Re-checks, at the edge, the values whose breach would be unsafe in a script, an argv
/// or a manifest, with the checker's own rules ([`dic_compiler::text_rules`]). The checker
/// already refused them; a failure here is a bug upstream, and it stops the output
/// instead of writing it.
fn outputs_are_safe(d: &DeploymentPlan) -> Result<(), String> {
    use dic_compiler::text_rules::{self as rules, TextRule};
    let check = |what: &str, value: &str, rule: TextRule| {
        rule.check(value)
            .map_err(|why| format!("{what} {value:?} {why}"))
    };
    check("the model source", &d.model.source, TextRule::Argument)?;
    check(
        "the served model name",
        &d.model.served_name,
        TextRule::Argument,
    )?;
    for (name, value) in &d.network.env {
        rules::env_name(name).map_err(|why| format!("environment variable {why}"))?;
        check("an environment value", value, TextRule::Free)?;
    }
    for (key, _) in &d.network.annotations {
        rules::qualified_name(key).map_err(|why| format!("annotation key {key:?} {why}"))?;
    }
    for (name, value) in &d.engine.env {
        rules::env_name(name).map_err(|why| format!("environment variable {why}"))?;
        check("an environment value", value, TextRule::Free)?;
    }
    // Re-checked here as for every unsafe value: the words reach scripts and manifests.
    if let Some(p) = dic_compiler::vllm_args::check_extra_args(
        &d.engine.extra_args,
        d.engine.cudagraph_mode.is_some(),
    )
    .first()
    {
        return Err(format!("extra_args: {}", p.message));
    }
    if let Some(secret) = &d.kubernetes.api_key_secret {
        check("the API key Secret", secret, TextRule::DnsLabel)?;
    }
    check("the image", &d.kubernetes.image, TextRule::Image)?;
    if let Some(ns) = &d.kubernetes.namespace {
        check("the namespace", ns, TextRule::DnsLabel)?;
    }
    if let Some(ifname) = &d.network.socket_ifname {
        check("the socket interface", ifname, TextRule::Interface)?;
    }
    check(
        "the token Secret",
        &d.kubernetes.hf_token_secret,
        TextRule::DnsLabel,
    )?;
    if let Some(image) = &d.kubernetes.preflight_image {
        check("the preflight image", image, TextRule::Image)?;
    }
    Ok(())
}

/// Every generated file, by path relative to the output folder (`D/vllm/node-0.sh`, …).
pub fn render(plan: &Plan) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for d in &plan.deployments {
        outputs_are_safe(d).map_err(|e| format!("deployment `{}`: {e}", d.name))?;
        for (path, text) in vllm::files(d) {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in k8s::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in nccl::files(d).map_err(|e| format!("deployment `{}`: {e}", d.name))? {
            out.insert(format!("{}/{path}", d.name), text);
        }
        for (path, text) in
            report::files(plan, d).map_err(|e| format!("deployment `{}`: {e}", d.name))?
        {
            out.insert(format!("{}/{path}", d.name), text);
        }
    }
    Ok(out)
}
