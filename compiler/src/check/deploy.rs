//! A deployment's merged fields → the typed [`Deploy`]: its layout, engine options
//! ([`super::engine`]), pod settings, model cache and autoscaler, with the rules that
//! tie them together.

use super::reader::Reader;
use super::*;
use crate::schema::dic_defaults;

impl Checker<'_, '_> {
    /// The typed deployment, and whether its rules hold.
    pub(super) fn build_deploy(
        &mut self,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
    ) -> (Deploy, bool) {
        let r = Reader(f);
        let mut ok = true;
        let (layout, layout_at) = match f.get("layout") {
            Some(FieldValue {
                value: Value::Layout(l),
                at,
                ..
            }) => (l.clone(), *at),
            _ => (LayoutSpec::Auto, FileSpan::new(raw.file, raw.name.span)),
        };
        let engine = match f.get("engine").map(|v| &v.value) {
            Some(Value::Engine(_, opts)) => {
                let (engine, engine_ok) = self.engine_options(opts);
                ok &= engine_ok;
                engine
            }
            _ => VllmOptions::default(),
        };
        let pod = r.block("pod").map(pod_settings).unwrap_or_default();
        ok &= self.pod_labels(f, &pod);
        let model_cache = self.model_cache(f, &r);
        ok &= model_cache.is_some() || !f.contains_key("model_cache");
        let model_cache = model_cache.unwrap_or(ModelCache::EmptyDir { size: None });
        let autoscale = self.autoscale(f, &r);
        ok &= autoscale.is_some() || !f.contains_key("autoscale");
        if let (Some(_), LayoutSpec::Disaggregated(_), Some(at)) =
            (&autoscale, &layout, f.get("autoscale").map(|v| v.at))
        {
            self.push(
                Diagnostic::new(
                    Code::InvalidLayout,
                    "`autoscale` with a disaggregated layout".to_string(),
                )
                .primary(at.file, at.span, "dic does not scale P/D pools yet")
                .help("size each pool's replicas in the layout (`dp`); `dic plan` lists splits that meet the SLOs at the declared load"),
            );
            ok = false;
        }
        let routing = r.block("routing").map(super::routing::gateway_routing);
        ok &= self.routing_rules(f, routing.as_ref());
        let lora = self.lora(f, &r);
        ok &= lora.is_some() || !f.contains_key("lora");
        let deploy = Deploy {
            model: r.reference("model"),
            cluster: r.reference("cluster"),
            workload: r.reference("workload"),
            slo: r.reference("slo"),
            layout,
            layout_at,
            engine,
            model_source: r.string("model_source"),
            served_model_name: r.string("served_model_name"),
            image: r.string("image"),
            namespace: r.string("namespace"),
            hf_token_secret: r.string("hf_token_secret"),
            api_key_secret: r.string("api_key_secret"),
            preflight_image: r.string("preflight_image"),
            allowed_weights: r.words("allowed_weights"),
            allowed_kv_cache: r.words("allowed_kv_cache"),
            pod,
            model_cache,
            autoscale,
            monitoring: r.word("monitoring").filter(|m| m != "none"),
            node_group: r.reference("node_group"),
            calibration: r
                .block("calibration")
                .map(|b| {
                    let c = Reader(b);
                    let d = crate::program::Calibration::default();
                    crate::program::Calibration {
                        step_time: c.num("step_time").unwrap_or(d.step_time),
                        prefill_time: c.num("prefill_time").unwrap_or(d.prefill_time),
                    }
                })
                .unwrap_or_default(),
            routing,
            lora,
            kv_offload: r.block("kv_offload").map(|b| {
                let k = Reader(b);
                KvOffload {
                    size: k.num("size").unwrap_or(0.0),
                    backend: k.word("backend").unwrap_or_else(|| "native".into()),
                }
            }),
        };
        (deploy, ok)
    }

    /// No `pod` label is one dic's selectors read. True when none is.
    fn pod_labels(&mut self, f: &BTreeMap<String, FieldValue>, pod: &PodSettings) -> bool {
        let Some(at) = f.get("pod").map(|v| v.at) else {
            return true;
        };
        let mut ok = true;
        for (key, _) in pod.labels.iter().filter(|(k, _)| reserved_label(k)) {
            self.push(
                Diagnostic::new(
                    Code::InvalidText,
                    format!("`pod` label `{key}` is one dic sets"),
                )
                .primary(
                    at.file,
                    at.span,
                    "the Services, PDB and LeaderWorkerSet select pods by it",
                )
                .help("use a key of your own, e.g. `team=ml` or `example.com/owner=ml`"),
            );
            ok = false;
        }
        ok
    }

    /// `model_cache = { … }`: one of `pvc` and `host_path` (or neither: an emptyDir);
    /// `storage_class` only for a claim dic creates. `None` after an error.
    fn model_cache(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        r: &Reader<'_>,
    ) -> Option<ModelCache> {
        let (Some(b), Some(at)) = (r.block("model_cache"), f.get("model_cache").map(|v| v.at))
        else {
            return Some(ModelCache::EmptyDir { size: None });
        };
        let c = Reader(b);
        let fail = |me: &mut Self, message: &str, help: &str| {
            me.push(
                Diagnostic::new(Code::TypeMismatch, format!("`model_cache`: {message}"))
                    .primary(at.file, at.span, "here")
                    .help(help.to_string()),
            );
            None
        };
        match (c.string("pvc"), c.string("host_path")) {
            (Some(_), Some(_)) => fail(self, "both `pvc` and `host_path`", "keep one: a claim, or a folder staged on every node"),
            (Some(claim), None) => Some(ModelCache::Pvc {
                claim,
                size: c.num("size"),
                storage_class: c.string("storage_class"),
            })
            .filter(|m| !matches!(m, ModelCache::Pvc { size: None, storage_class: Some(_), .. }))
            .or_else(|| fail(self, "`storage_class` without `size`", "dic creates the claim only when it knows its `size`; an existing claim already has its class")),
            (None, Some(path)) if c.num("size").is_none() && c.string("storage_class").is_none() => {
                Some(ModelCache::HostPath(path))
            }
            (None, Some(_)) => fail(self, "`size` or `storage_class` with `host_path`", "a host folder has neither: remove them"),
            (None, None) if c.string("storage_class").is_some() => fail(self, "`storage_class` without `pvc`", "name the claim: `pvc = \"models\", size = 1 TiB, storage_class = \"…\"`"),
            (None, None) => Some(ModelCache::EmptyDir { size: c.num("size") }),
        }
    }

    /// `autoscale = { … }`: `min ≤ max`, scale to zero and `prometheus` only with KEDA,
    /// which needs `prometheus`. `None` when absent or after an error.
    fn autoscale(&mut self, f: &BTreeMap<String, FieldValue>, r: &Reader<'_>) -> Option<Autoscale> {
        let b = r.block("autoscale")?;
        let at = f.get("autoscale").map(|v| v.at)?;
        let a = Reader(b);
        let keda = a.word("via").as_deref() == Some("keda");
        let max = a.uint("max");
        let min = a.uint("min").unwrap_or(1);
        // Without `max` the block already has its error (a required field).
        let max = max?;
        let problem = match (max, keda, a.string("prometheus").is_some()) {
            (max, _, _) if min > max => Some(("`min` is above `max`", "swap them")),
            (_, false, _) if min == 0 => Some(("`min = 0` needs KEDA", "a HorizontalPodAutoscaler cannot scale to zero: add `via = keda` and `prometheus`")),
            (_, true, false) => Some(("KEDA needs `prometheus`", "add the server KEDA queries, e.g. `prometheus = \"http://prometheus.monitoring:9090\"`")),
            (_, false, true) => Some(("`prometheus` is read only by KEDA", "add `via = keda`, or remove `prometheus` (the HPA reads the custom-metrics API)")),
            _ => None,
        };
        if let Some((message, help)) = problem {
            self.push(
                Diagnostic::new(Code::MissingField, message.to_string())
                    .primary(at.file, at.span, "here")
                    .help(help.to_string()),
            );
            return None;
        }
        Some(Autoscale {
            min,
            max,
            waiting: a.uint("waiting").unwrap_or(dic_defaults::AUTOSCALE_WAITING),
            keda,
            prometheus: a.string("prometheus"),
        })
    }
}

/// Pod label keys dic's selectors read (its own, and the LeaderWorkerSet controller's).
fn reserved_label(key: &str) -> bool {
    [
        "app.kubernetes.io/name",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/component",
        "role",
    ]
    .contains(&key)
        || key.starts_with("leaderworkerset.sigs.k8s.io/")
        || key.starts_with("dic.dev/")
}

/// `pod = { … }` as typed settings.
fn pod_settings(b: &BTreeMap<String, FieldValue>) -> PodSettings {
    let r = Reader(b);
    let pairs = |k: &str| r.pairs(k);
    PodSettings {
        cpu: r.uint("cpu"),
        memory: r.num("memory"),
        node_selector: pairs("node_selector"),
        tolerations: r.strings("tolerations"),
        runtime_class: r.string("runtime_class"),
        service_account: r.string("service_account"),
        image_pull_secrets: r.strings("image_pull_secrets"),
        labels: pairs("labels"),
        annotations: pairs("annotations"),
        priority_class: r.string("priority_class"),
    }
}
