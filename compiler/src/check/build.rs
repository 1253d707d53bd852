//! Merged fields → the typed [`Body`] of each kind, through [`Reader`].

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    /// Builds the typed body from merged fields; false when a semantic rule failed.
    pub(super) fn build(
        &mut self,
        kind: Kind,
        _id: DefId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
    ) -> (Body, bool) {
        let r = Reader(f);
        let file = raw.file;
        let mut ok = true;
        let body = match kind {
            Kind::Gpu => {
                let bf16 = r.num("bf16").unwrap_or(0.0);
                Body::Gpu(Gpu {
                    names: r.strings("names"),
                    vendor: r.word("vendor"),
                    architecture: r.word("architecture"),
                    memory: r.num("memory").unwrap_or(0.0),
                    memory_bandwidth: r.num("memory_bandwidth").unwrap_or(0.0),
                    bf16,
                    fp16: r.num("fp16").unwrap_or(bf16),
                    fp8: r.num("fp8"),
                    fp4: r.num("fp4"),
                    int8: r.num("int8"),
                    scale_up: r.reference("scale_up"),
                    pcie: r.reference("pcie"),
                })
            }
            Kind::Link => Body::Link(Link {
                link_type: r
                    .word("type")
                    .and_then(|w| LinkType::parse(&w))
                    .unwrap_or(LinkType::Ethernet),
                bandwidth: r.num("bandwidth").unwrap_or(0.0),
                latency: r.num("latency").unwrap_or(0.0),
                generation: r.string("generation"),
            }),
            Kind::Node => {
                let (gpu_count, gpu) = match r.count_of("gpus") {
                    Some((n, id)) => (n, Some(id)),
                    None => (0, None),
                };
                let scale_up = r.reference("scale_up");
                let default_domain = if scale_up.is_some() { gpu_count } else { 1 };
                Body::Node(Node {
                    gpu,
                    gpu_count,
                    scale_up,
                    scale_up_domain: r
                        .int("scale_up_domain")
                        .map(|v| v as u64)
                        .unwrap_or(default_domain),
                    nics: r.count_of("nics"),
                    price: r.num("price"),
                    provider: r.string("provider"),
                    cpu_memory: r.num("cpu_memory"),
                    network: r.reference("network"),
                })
            }
            Kind::Cluster => Body::Cluster(Cluster {
                groups: match f.get("nodes").map(|v| &v.value) {
                    Some(Value::Groups(g)) => g
                        .iter()
                        .map(|(count, node)| NodeGroup {
                            count: *count,
                            node: *node,
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                fabric: r.reference("fabric"),
                price: r.num("price"),
                region: r.string("region"),
                network: r.reference("network"),
            }),
            Kind::Model => {
                let heads = r.uint("heads").unwrap_or(1).max(1);
                let hidden = r.uint("hidden").unwrap_or(0);
                let kv_heads = r.uint("kv_heads").unwrap_or(heads);
                let experts = r.uint("experts").unwrap_or(0);
                let attention = match r.word("attention").as_deref() {
                    Some("mla") => Attention::Mla,
                    Some("mha") => Attention::Mha,
                    Some(_) => Attention::Gqa,
                    None if r.uint("kv_lora_rank").is_some() => Attention::Mla,
                    None if kv_heads == heads => Attention::Mha,
                    None => Attention::Gqa,
                };
                let dtype = r.word("dtype").unwrap_or_else(|| "bf16".into());
                let model = Model {
                    hf: r.string("hf"),
                    parameters: r.num("parameters").unwrap_or(0.0),
                    layers: r.uint("layers").unwrap_or(0),
                    hidden,
                    heads,
                    kv_heads,
                    head_dim: r.uint("head_dim").unwrap_or(hidden / heads),
                    intermediate: r.uint("intermediate").unwrap_or(0),
                    vocab: r.uint("vocab").unwrap_or(0),
                    max_context: r.num("max_context").unwrap_or(0.0),
                    attention,
                    experts,
                    experts_per_token: r.uint("experts_per_token").unwrap_or(0),
                    shared_experts: r.uint("shared_experts").unwrap_or(0),
                    moe_intermediate: r.uint("moe_intermediate").unwrap_or(0),
                    dense_layers: r.uint("dense_layers").unwrap_or(0),
                    moe_layer_step: r.uint("moe_layer_step").unwrap_or(1),
                    kv_lora_rank: r.uint("kv_lora_rank").unwrap_or(0),
                    q_lora_rank: r.uint("q_lora_rank").unwrap_or(0),
                    qk_rope_head_dim: r.uint("qk_rope_head_dim").unwrap_or(0),
                    qk_nope_head_dim: r.uint("qk_nope_head_dim").unwrap_or(0),
                    v_head_dim: r.uint("v_head_dim").unwrap_or(0),
                    sliding_window: r.num("sliding_window"),
                    sliding_layers: r.uint("sliding_layers").unwrap_or(0),
                    tied_embeddings: r.boolean("tied_embeddings").unwrap_or(false),
                    weights: r.word("weights").unwrap_or_else(|| dtype.clone()),
                    dtype,
                    kv_cache: r.word("kv_cache").unwrap_or_else(|| "auto".into()),
                    prequantized: r.boolean("prequantized").unwrap_or(false),
                    detail: Box::new(ModelDetail {
                        layer_kinds: Vec::new(),
                        sliding_kv_heads: r.uint("sliding_kv_heads").unwrap_or(0),
                        sliding_head_dim: r.uint("sliding_head_dim").unwrap_or(0),
                        linear: r.uint("linear_value_heads").map(|vh| LinearAttention {
                            key_heads: r.uint("linear_key_heads").unwrap_or(vh),
                            value_heads: vh,
                            key_dim: r.uint("linear_key_dim").unwrap_or(0),
                            value_dim: r.uint("linear_value_dim").unwrap_or(0),
                            conv_kernel: r.uint("linear_conv_kernel").unwrap_or(4),
                        }),
                        mamba: r.uint("mamba_heads").map(|heads| Mamba2 {
                            heads,
                            head_dim: r.uint("mamba_head_dim").unwrap_or(0),
                            state: r.uint("mamba_state").unwrap_or(0),
                            groups: r.uint("mamba_groups").unwrap_or(1),
                            conv_kernel: r.uint("mamba_conv_kernel").unwrap_or(4),
                        }),
                        state_dtype: r.word("state_dtype").filter(|d| d != "auto"),
                        indexer_head_dim: r.uint("indexer_head_dim").unwrap_or(0),
                        indexer_heads: r.uint("indexer_heads").unwrap_or(0),
                        shared_expert_intermediate: r
                            .uint("shared_expert_intermediate")
                            .unwrap_or(0),
                        ungated_mlp: r.boolean("ungated_mlp").unwrap_or(false),
                        encoder_parameters: r.num("encoder_parameters").unwrap_or(0.0),
                        attention_weights: r.word("attention_weights"),
                        expert_weights: r.word("expert_weights"),
                        mlp_weights: r.word("mlp_weights"),
                        unquantized_layers: r.uint("unquantized_layers").unwrap_or(0),
                        unquantized_mixer_layers: r.uints("unquantized_mixer_layers"),
                        quant_group: r.uint("quant_group").unwrap_or(0),
                        mtp_layers: r.uint("mtp_layers").unwrap_or(0),
                    }),
                };
                let mut model = model;
                ok &= self.layer_pattern(file, raw, f, &mut model);
                ok &= self.model_rules(file, raw, f, &model);
                Body::Model(model)
            }
            Kind::Workload => {
                let w = Workload {
                    prompt: r.num("prompt").unwrap_or(0.0),
                    output: r.num("output").unwrap_or(0.0),
                    rate: r.num("rate"),
                    concurrency: r.uint("concurrency"),
                    requests: r.uint("requests"),
                    prefix_reuse: r.num("prefix_reuse").unwrap_or(0.0),
                    shared_prefix: r.num("shared_prefix").unwrap_or(0.0),
                };
                let written = raw
                    .body
                    .iter()
                    .flat_map(|b| b.entries.iter())
                    .any(|e| e.key[0].node == "rate" || e.key[0].node == "concurrency");
                if w.rate.is_none() && w.concurrency.is_none() && !written {
                    self.push(
                        Diagnostic::new(
                            Code::MissingField,
                            format!(
                                "workload `{}` has neither `rate` nor `concurrency`",
                                raw.name.node
                            ),
                        )
                        .primary(file, raw.name.span, "how much traffic?")
                        .help(
                            "add `rate = 10 req/s` (open loop) or `concurrency = 64` (closed loop)",
                        ),
                    );
                    ok = false;
                }
                if w.rate.is_some() && w.concurrency.is_some() {
                    let at = f.get("concurrency").map(|v| v.entry).expect("present");
                    self.push(
                        Diagnostic::new(Code::TypeMismatch, format!("workload `{}` has both `rate` and `concurrency`", raw.name.node))
                            .primary(at.file, at.span, "one or the other")
                            .help("keep `rate` for an open-loop arrival rate or `concurrency` for a closed loop"),
                    );
                    ok = false;
                }
                if w.shared_prefix >= w.prompt && w.prompt > 0.0 && f.contains_key("shared_prefix")
                {
                    let at = f.get("shared_prefix").map(|v| v.at).expect("present");
                    self.push(
                        Diagnostic::new(
                            Code::OutOfRange,
                            format!(
                                "workload `{}`: `shared_prefix` ({}) is not shorter than the prompt ({})",
                                raw.name.node,
                                crate::units::fmt_num(w.shared_prefix),
                                crate::units::fmt_num(w.prompt)
                            ),
                        )
                        .primary(at.file, at.span, "the prefix every prompt starts with")
                        .help("a shared prefix is the part of `prompt` that every request repeats; each request adds at least one token of its own"),
                    );
                    ok = false;
                }
                Body::Workload(w)
            }
            Kind::Slo => {
                let mut bounds = Vec::new();
                for (key, fv) in f {
                    let (metric, pct) = key.split_once('.').unwrap_or((key.as_str(), "p50"));
                    let metric = match metric {
                        "ttft" => SloMetric::Ttft,
                        "tpot" => SloMetric::Tpot,
                        "itl" => SloMetric::Itl,
                        "e2e" => SloMetric::E2e,
                        "throughput" => SloMetric::Throughput,
                        _ => SloMetric::RequestRate,
                    };
                    if let Value::Bound(op, value) = fv.value {
                        bounds.push(SloBound {
                            metric,
                            percentile: pct.to_string(),
                            op,
                            value,
                            at: fv.entry,
                        });
                    }
                }
                Body::Slo(Slo { bounds })
            }
            Kind::Deploy => {
                let (layout, layout_at) = match f.get("layout") {
                    Some(FieldValue {
                        value: Value::Layout(l),
                        at,
                        ..
                    }) => (l.clone(), *at),
                    _ => (LayoutSpec::Auto, FileSpan::new(file, raw.name.span)),
                };
                let engine = match f.get("engine").map(|v| &v.value) {
                    Some(Value::Engine(_, opts)) => {
                        ok &= self.passthrough(opts);
                        ok &= self.speculative(opts);
                        vllm_options(opts)
                    }
                    _ => VllmOptions::default(),
                };
                let pod = r.block("pod").map(|b| pod_settings(&b)).unwrap_or_default();
                for (key, _) in pod.labels.iter().filter(|(k, _)| reserved_label(k)) {
                    let at = f.get("pod").map(|v| v.at).expect("present");
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
                let model_cache = self.model_cache(f, &r);
                ok &= model_cache.is_some() || !f.contains_key("model_cache");
                let model_cache = model_cache.unwrap_or(ModelCache::EmptyDir { size: None });
                let autoscale = self.autoscale(f, &r);
                ok &= autoscale.is_some() || !f.contains_key("autoscale");
                if let (Some(_), LayoutSpec::Disaggregated(_)) = (&autoscale, &layout) {
                    let at = f.get("autoscale").map(|v| v.at).expect("present");
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
                Body::Deploy(Box::new(Deploy {
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
                }))
            }
            Kind::Network => {
                let mut pairs = |key: &str| -> Vec<(String, String)> {
                    let mut out = Vec::new();
                    for item in r.strings(key) {
                        match item.split_once('=') {
                            Some((k, v)) if !k.trim().is_empty() => {
                                out.push((k.trim().to_string(), v.to_string()))
                            }
                            _ => {
                                let at = f.get(key).map(|v| v.at).expect("present");
                                self.push(
                                    Diagnostic::new(
                                        Code::TypeMismatch,
                                        format!("`{key}` entry \"{item}\" is not `NAME=value`"),
                                    )
                                    .primary(at.file, at.span, "missing `=`")
                                    .help(format!(
                                        "write e.g. \"{}\"",
                                        if key == "env" {
                                            "NCCL_IB_HCA=mlx5"
                                        } else {
                                            "example.com/key=value"
                                        }
                                    )),
                                );
                                ok = false;
                            }
                        }
                    }
                    out
                };
                let env = pairs("env");
                let annotations = pairs("annotations");
                // Secrets are referenced, never inlined: a credential written here would be
                // copied in plain text into every script, commands.json and manifest.
                for (name, _) in env.iter().filter(|(n, _)| text_rules::names_a_secret(n)) {
                    let at = f.get("env").map(|v| v.at).expect("present");
                    self.push(
                        Diagnostic::new(
                            Code::InvalidText,
                            format!("`env` would inline the credential `{name}`"),
                        )
                        .primary(at.file, at.span, "written into scripts and manifests in plain text")
                        .help("keep credentials out of .dist files: the Hugging Face token comes from the Secret named by `hf_token_secret` (Kubernetes) or HF_TOKEN in the node's environment (scripts)"),
                    );
                    ok = false;
                }
                for (name, value) in &env {
                    let (Some(shape), Some(at)) = (
                        crate::secrets::secret_shape(value),
                        f.get("env").map(|v| v.at),
                    ) else {
                        continue;
                    };
                    self.push(
                        Diagnostic::new(
                            Code::InlineSecret,
                            format!(
                                "`env` sets `{name}` to what looks like {} (`{}`)",
                                shape.what, shape.shown
                            ),
                        )
                        .primary(at.file, at.span, "written into manifests in plain text")
                        .help(crate::vllm_args::SECRET_HELP),
                    );
                    ok = false;
                }
                let host_network = r.boolean("host_network").unwrap_or(false);
                if host_network && r.string("socket_ifname").is_none() {
                    let at = f.get("host_network").map(|v| v.entry).expect("present");
                    self.push(
                        Diagnostic::new(
                            Code::MissingField,
                            format!("network `{}` runs pods in the host network without `socket_ifname`", raw.name.node),
                        )
                        .primary(at.file, at.span, "the pods see the hosts' interfaces")
                        .help("name the hosts' interface for NCCL and Gloo, e.g. `socket_ifname = \"bond0\"` (`ip -br link` on a node): in the host network Gloo otherwise binds to loopback and multi-node groups never connect"),
                    );
                    ok = false;
                }
                Body::Network(Network {
                    resource: r.string("resource"),
                    resource_count: r.uint("resource_count").unwrap_or(1),
                    capabilities: r.strings("capabilities"),
                    annotations,
                    env,
                    socket_ifname: r.string("socket_ifname"),
                    host_network,
                })
            }
        };
        (body, ok)
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
    let pairs = |k: &str| -> Vec<(String, String)> {
        r.strings(k)
            .iter()
            .filter_map(|s| s.split_once('='))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
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

impl Checker<'_, '_> {
    /// `model_cache = { … }`: one of `pvc` and `host_path` (or neither: an emptyDir);
    /// `storage_class` only for a claim dic creates. `None` after an error.
    fn model_cache(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        r: &Reader<'_>,
    ) -> Option<ModelCache> {
        let Some(b) = r.block("model_cache") else {
            return Some(ModelCache::EmptyDir { size: None });
        };
        let at = f.get("model_cache").map(|v| v.at).expect("present");
        let c = Reader(&b);
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
        let at = f.get("autoscale").map(|v| v.at).expect("present");
        let a = Reader(&b);
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
            waiting: a.uint("waiting").unwrap_or(5),
            keda,
            prometheus: a.string("prometheus"),
        })
    }

    /// The engine's `speculative` block: each method's own input is there, and only it.
    /// True when it is clean (or absent).
    fn speculative(&mut self, opts: &BTreeMap<String, FieldValue>) -> bool {
        let r = Reader(opts);
        let mut ok = true;
        if let (Some(b), Some(fv)) = (r.block("speculative"), opts.get("speculative")) {
            let s = Reader(&b);
            let method = s.word("method").unwrap_or_default();
            let (has_source, has_draft) =
                (s.string("source").is_some(), s.reference("draft").is_some());
            let problem = match method.as_str() {
                "eagle" | "eagle3" if !has_source => Some((
                    format!("`method = {method}` needs the head's checkpoint"),
                    "add `source = \"…\"`, the EAGLE head trained for this model (e.g. \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\")".to_string(),
                )),
                "draft_model" if !has_draft => Some((
                    "`method = draft_model` needs the draft model".to_string(),
                    "add `draft = <model>`, a smaller model with the same tokenizer (e.g. `draft = llama_3_2_1b` defined from its config)".to_string(),
                )),
                "mtp" | "ngram" if has_source || has_draft => Some((
                    format!("`method = {method}` takes no `source` or `draft`"),
                    if method == "mtp" {
                        "MTP drafts with the checkpoint's own `mtp_layers`: remove `source`/`draft`".to_string()
                    } else {
                        "n-gram drafting looks tokens up in the prompt: remove `source`/`draft`".to_string()
                    },
                )),
                "eagle" | "eagle3" if has_draft => Some((
                    format!("`method = {method}` takes `source`, not `draft`"),
                    "`draft` is for `method = draft_model`".to_string(),
                )),
                "draft_model" if has_source => Some((
                    "`method = draft_model` takes `draft`, not `source`".to_string(),
                    "the draft model's `hf` is what vLLM loads".to_string(),
                )),
                _ => None,
            };
            if let Some((message, help)) = problem {
                self.push(
                    Diagnostic::new(Code::MissingField, message)
                        .primary(fv.at.file, fv.at.span, "speculative decoding")
                        .help(help),
                );
                ok = false;
            }
        }
        ok
    }

    /// The engine block's pass-through options, checked against vLLM's own option table
    /// and dic's own flags and variables (E0314). True when they are clean.
    fn passthrough(&mut self, opts: &BTreeMap<String, FieldValue>) -> bool {
        let r = Reader(opts);
        let mut ok = true;
        if let Some(fv) = opts.get("extra_args") {
            for p in crate::vllm_args::check_extra_args(
                &r.strings("extra_args"),
                opts.contains_key("cudagraph_mode"),
            ) {
                self.push(
                    Diagnostic::new(
                        p.code,
                        format!("`extra_args` item {}: {}", p.index + 1, p.message),
                    )
                    .primary(fv.at.file, fv.at.span, "passed to `vllm serve`")
                    .help(p.help),
                );
                ok = false;
            }
        }
        if let Some(fv) = opts.get("env") {
            for p in crate::vllm_args::check_env(&r.strings("env")) {
                self.push(
                    Diagnostic::new(p.code, p.message)
                        .primary(fv.at.file, fv.at.span, "the vLLM processes' environment")
                        .help(p.help),
                );
                ok = false;
            }
        }
        ok
    }
}

/// Typed access to merged fields (already checked, so absent means "not set").
struct Reader<'a>(&'a BTreeMap<String, FieldValue>);

impl Reader<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k).map(|v| &v.value)
    }
    fn num(&self, k: &str) -> Option<f64> {
        match self.get(k)? {
            Value::Number(n) => Some(*n),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    fn int(&self, k: &str) -> Option<i64> {
        match self.get(k)? {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    fn uint(&self, k: &str) -> Option<u64> {
        self.int(k).map(|v| v.max(0) as u64)
    }
    fn boolean(&self, k: &str) -> Option<bool> {
        match self.get(k)? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn word(&self, k: &str) -> Option<String> {
        match self.get(k)? {
            Value::Enum(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn string(&self, k: &str) -> Option<String> {
        match self.get(k)? {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn uints(&self, k: &str) -> Vec<u64> {
        match self.get(k) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Int(i) => u64::try_from(*i).ok(),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn block(&self, k: &str) -> Option<BTreeMap<String, FieldValue>> {
        match self.get(k) {
            Some(Value::Block(b)) => Some(b.clone()),
            _ => None,
        }
    }
    fn strings(&self, k: &str) -> Vec<String> {
        match self.get(k) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn words(&self, k: &str) -> Vec<String> {
        match self.get(k) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Enum(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn reference(&self, k: &str) -> Option<DefId> {
        match self.get(k)? {
            Value::Ref(id) => Some(*id),
            _ => None,
        }
    }
    fn count_of(&self, k: &str) -> Option<(u64, DefId)> {
        match self.get(k)? {
            Value::CountOf(n, id) => Some((*n, *id)),
            _ => None,
        }
    }
}

pub(super) fn vllm_options(opts: &BTreeMap<String, FieldValue>) -> VllmOptions {
    let r = Reader(opts);
    VllmOptions {
        gpu_memory_utilization: r.num("gpu_memory_utilization"),
        max_model_len: r.num("max_model_len"),
        max_num_seqs: r.uint("max_num_seqs"),
        max_num_batched_tokens: r.num("max_num_batched_tokens"),
        block_size: r.uint("block_size"),
        enforce_eager: r.boolean("enforce_eager").unwrap_or(false),
        cudagraph_mode: r.word("cudagraph_mode"),
        kv_cache_memory: r.num("kv_cache_memory"),
        enable_prefix_caching: r.boolean("enable_prefix_caching"),
        cpu_offload: r.num("cpu_offload"),
        launcher: r.word("launcher"),
        all2all_backend: r.word("all2all_backend"),
        port: r.uint("port"),
        activation_memory: r.num("activation_memory"),
        non_torch_memory: r.num("non_torch_memory"),
        cuda_graph_memory: r.num("cuda_graph_memory"),
        speculative: r.block("speculative").map(|b| {
            let s = Reader(&b);
            let method = s.word("method").unwrap_or_else(|| "eagle3".into());
            crate::program::SpeculativeOptions {
                acceptance: s.num("acceptance").unwrap_or_else(|| {
                    crate::program::SpeculativeOptions::default_acceptance(&method)
                }),
                source: s.string("source"),
                draft: s.reference("draft"),
                tokens: s.uint("tokens").unwrap_or(3),
                method,
            }
        }),
        extra_args: r.strings("extra_args"),
        env: r
            .strings("env")
            .iter()
            .filter_map(|a| a.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}
