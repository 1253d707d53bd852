//! A deployment's `routing = { … }` block → [`GatewayRouting`], and the rule on it: the
//! endpoint picker needs at least one scorer. (A disaggregated layout is routed as llm-d
//! routes P/D: `ir::gateway`.)

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
    /// The rule of `routing`: some scorer weighs in. True when it holds (or there is no
    /// `routing`).
    pub(super) fn routing_rules(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        routing: Option<&GatewayRouting>,
    ) -> bool {
        let (Some(routing), Some(at)) = (routing, f.get("routing").map(|v| v.at)) else {
            return true;
        };
        let weights = [
            routing.queue_weight,
            routing.kv_weight,
            routing.prefix_weight,
        ];
        if !weights.iter().all(|w| *w == Some(0)) {
            return true;
        }
        self.push(
            Diagnostic::new(
                Code::TypeMismatch,
                "every scorer of the endpoint picker weighs 0".to_string(),
            )
            .primary(
                at.file,
                at.span,
                "the picker would choose a server at random",
            )
            .help("give `queue_weight` or `kv_weight` a weight above 0".to_string()),
        );
        false
    }
}
