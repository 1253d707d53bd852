//! The launch plan's last check before a target writes it: the values whose breach would
//! be unsafe in a script, an argv or a manifest, re-checked with the checker's own rules
//! ([`crate::text_rules`], [`crate::vllm_args`]). The checker already refused them; a
//! failure here is a bug upstream, and the targets stop instead of writing.

use super::DeploymentPlan;
use crate::text_rules::{self as rules, TextRule};

impl DeploymentPlan {
    /// `Err` names the first value that is not safe to write.
    pub fn check_outputs_safe(&self) -> Result<(), String> {
        let d = self;
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
        for (name, value) in d.network.env.iter().chain(&d.engine.env) {
            rules::env_name(name).map_err(|why| format!("environment variable {why}"))?;
            check("an environment value", value, TextRule::Free)?;
        }
        for (key, _) in &d.network.annotations {
            rules::qualified_name(key).map_err(|why| format!("annotation key {key:?} {why}"))?;
        }
        // The words reach scripts and manifests.
        if let Some(p) = crate::vllm_args::check_extra_args(
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
}
