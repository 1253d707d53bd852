//! A deployment's `routing = { … }` block → [`GatewayRouting`], and the rules on it: the
//! endpoint picker needs at least one scorer, and dic routes a disaggregated layout
//! through its own P/D router only.

use super::reader::Reader;
use super::*;
use crate::program::GatewayRouting;

/// `routing = { … }` as typed settings (the block was type-checked against
/// [`crate::schema::ROUTING_FIELDS`]; its required `gateway` reads as empty when absent,
/// and the block already has that error).
pub(super) fn gateway_routing(b: &BTreeMap<String, FieldValue>) -> GatewayRouting {
    let r = Reader(b);
    GatewayRouting {
        gateway: r.string("gateway").unwrap_or_default(),
        gateway_namespace: r.string("gateway_namespace"),
        queue_weight: r.uint("queue_weight"),
        kv_weight: r.uint("kv_weight"),
        prefix_weight: r.uint("prefix_weight"),
        epp_image: r.string("epp_image"),
    }
}

impl Checker<'_, '_> {
    /// The rules of `routing`: some scorer weighs in, and the layout is not
    /// disaggregated. True when they hold (or there is no `routing`).
    pub(super) fn routing_rules(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        routing: Option<&GatewayRouting>,
        layout: &LayoutSpec,
    ) -> bool {
        let (Some(routing), Some(at)) = (routing, f.get("routing").map(|v| v.at)) else {
            return true;
        };
        let problem = if matches!(layout, LayoutSpec::Disaggregated(_)) {
            Some((
                Code::InvalidLayout,
                "`routing` with a disaggregated layout",
                "dic does not yet emit llm-d's routing sidecar, which a P/D pool behind an endpoint picker needs on its decode pods",
                "remove `routing`: dic's P/D router (the deployment's Service) fronts both pools",
            ))
        } else if [
            routing.queue_weight,
            routing.kv_weight,
            routing.prefix_weight,
        ]
        .iter()
        .all(|w| *w == Some(0))
        {
            Some((
                Code::TypeMismatch,
                "every scorer of the endpoint picker weighs 0",
                "the picker would choose a server at random",
                "give `queue_weight` or `kv_weight` a weight above 0",
            ))
        } else {
            None
        };
        let Some((code, message, label, help)) = problem else {
            return true;
        };
        self.push(
            Diagnostic::new(code, message.to_string())
                .primary(at.file, at.span, label)
                .help(help.to_string()),
        );
        false
    }
}
