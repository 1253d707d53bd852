//! Merged fields → the typed [`Body`] of each kind: one builder per kind, reading the
//! fields through [`Reader`], plus the rules that need several fields at once. A
//! deployment's builder is in [`super::deploy`], its engine block's in [`super::engine`].

use super::reader::Reader;
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
        match kind {
            Kind::Gpu => (Body::Gpu(gpu(&r)), true),
            Kind::Link => (Body::Link(link(&r)), true),
            Kind::Node => (Body::Node(node(&r)), true),
            Kind::Cluster => (Body::Cluster(cluster(&r, f)), true),
            Kind::Model => {
                let mut model = model(&r);
                let mut ok = self.layer_pattern(raw.file, raw, f, &mut model);
                ok &= self.model_rules(raw.file, raw, f, &model);
                (Body::Model(model), ok)
            }
            Kind::Workload => {
                let (workload, ok) = self.build_workload(raw, f);
                (Body::Workload(workload), ok)
            }
            Kind::Slo => (Body::Slo(slo(f)), true),
            Kind::Deploy => {
                let (deploy, ok) = self.build_deploy(raw, f);
                (Body::Deploy(Box::new(deploy)), ok)
            }
            Kind::Network => {
                let (network, ok) = self.build_network(raw, f);
                (Body::Network(network), ok)
            }
        }
    }

    /// The typed workload, and whether its load and prefix are consistent.
    fn build_workload(
        &mut self,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
    ) -> (Workload, bool) {
        let r = Reader(f);
        let w = Workload {
            prompt: r.num("prompt").unwrap_or(0.0),
            output: r.num("output").unwrap_or(0.0),
            rate: r.num("rate"),
            concurrency: r.uint("concurrency"),
            requests: r.uint("requests"),
            prefix_reuse: r.num("prefix_reuse").unwrap_or(0.0),
            shared_prefix: r.num("shared_prefix").unwrap_or(0.0),
        };
        let mut ok = true;
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
                .primary(raw.file, raw.name.span, "how much traffic?")
                .help("add `rate = 10 req/s` (open loop) or `concurrency = 64` (closed loop)"),
            );
            ok = false;
        }
        if let (Some(_), Some(_), Some(at)) =
            (w.rate, w.concurrency, f.get("concurrency").map(|v| v.entry))
        {
            self.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    format!(
                        "workload `{}` has both `rate` and `concurrency`",
                        raw.name.node
                    ),
                )
                .primary(at.file, at.span, "one or the other")
                .help(
                    "keep `rate` for an open-loop arrival rate or `concurrency` for a closed loop",
                ),
            );
            ok = false;
        }
        if let (true, Some(at)) = (
            w.shared_prefix >= w.prompt && w.prompt > 0.0,
            f.get("shared_prefix").map(|v| v.at),
        ) {
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
        (w, ok)
    }

    /// The typed network profile, and whether its pairs, secrets and host network hold.
    fn build_network(&mut self, raw: &RawDef, f: &BTreeMap<String, FieldValue>) -> (Network, bool) {
        let r = Reader(f);
        let (env, env_ok) = self.network_pairs(f, &r, "env");
        let (annotations, annotations_ok) = self.network_pairs(f, &r, "annotations");
        let mut ok = env_ok && annotations_ok;
        // Secrets are referenced, never inlined: a credential written here would be
        // copied in plain text into every script, commands.json and manifest.
        if let Some(at) = f.get("env").map(|v| v.at) {
            for (name, _) in env.iter().filter(|(n, _)| text_rules::names_a_secret(n)) {
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
        }
        ok &= self.env_secret_shapes(f, &env);
        let host_network = r.boolean("host_network").unwrap_or(false);
        if let (true, None, Some(at)) = (
            host_network,
            r.string("socket_ifname"),
            f.get("host_network").map(|v| v.entry),
        ) {
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
        let network = Network {
            resource: r.string("resource"),
            resource_count: r.uint("resource_count").unwrap_or(1),
            capabilities: r.strings("capabilities"),
            annotations,
            env,
            socket_ifname: r.string("socket_ifname"),
            host_network,
        };
        (network, ok)
    }

    /// No `env` value looks like a credential (a token's shape). True when none does.
    fn env_secret_shapes(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        env: &[(String, String)],
    ) -> bool {
        let mut ok = true;
        for (name, value) in env {
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
        ok
    }

    /// A network profile's `"NAME=value"` list `key` as pairs (trimmed names), and
    /// whether every item is one.
    fn network_pairs(
        &mut self,
        f: &BTreeMap<String, FieldValue>,
        r: &Reader<'_>,
        key: &str,
    ) -> (Vec<(String, String)>, bool) {
        let mut ok = true;
        let mut out = Vec::new();
        for item in r.strings(key) {
            match item.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    out.push((k.trim().to_string(), v.to_string()))
                }
                _ => {
                    let Some(at) = f.get(key).map(|v| v.at) else {
                        continue;
                    };
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
        (out, ok)
    }
}

fn gpu(r: &Reader<'_>) -> Gpu {
    let bf16 = r.num("bf16").unwrap_or(0.0);
    Gpu {
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
    }
}

fn link(r: &Reader<'_>) -> Link {
    Link {
        link_type: r
            .keyword("type", LinkType::parse)
            .unwrap_or(LinkType::Ethernet),
        bandwidth: r.num("bandwidth").unwrap_or(0.0),
        latency: r.num("latency").unwrap_or(0.0),
        generation: r.string("generation"),
    }
}

fn node(r: &Reader<'_>) -> Node {
    let (gpu_count, gpu) = match r.count_of("gpus") {
        Some((n, id)) => (n, Some(id)),
        None => (0, None),
    };
    let scale_up = r.reference("scale_up");
    let default_domain = if scale_up.is_some() { gpu_count } else { 1 };
    Node {
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
    }
}

fn cluster(r: &Reader<'_>, f: &BTreeMap<String, FieldValue>) -> Cluster {
    Cluster {
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
    }
}

/// The typed model, before its layer pattern ([`Checker::layer_pattern`]) is read.
fn model(r: &Reader<'_>) -> Model {
    let heads = r.uint("heads").unwrap_or(1).max(1);
    let hidden = r.uint("hidden").unwrap_or(0);
    let kv_heads = r.uint("kv_heads").unwrap_or(heads);
    let attention = match r.keyword("attention", Attention::parse) {
        Some(written) => written,
        None if r.uint("kv_lora_rank").is_some() => Attention::Mla,
        None if kv_heads == heads => Attention::Mha,
        None => Attention::Gqa,
    };
    let dtype = r.word("dtype").unwrap_or_else(|| "bf16".into());
    Model {
        hf: r.string("hf"),
        architecture: r.string("architecture"),
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
        experts: r.uint("experts").unwrap_or(0),
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
        detail: Box::new(model_detail(r)),
    }
}

/// The model's less common fields: hybrid mixers, mixed precision, MTP.
fn model_detail(r: &Reader<'_>) -> ModelDetail {
    ModelDetail {
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
        shared_expert_intermediate: r.uint("shared_expert_intermediate").unwrap_or(0),
        ungated_mlp: r.boolean("ungated_mlp").unwrap_or(false),
        encoder_parameters: r.num("encoder_parameters").unwrap_or(0.0),
        attention_weights: r.word("attention_weights"),
        expert_weights: r.word("expert_weights"),
        mlp_weights: r.word("mlp_weights"),
        unquantized_layers: r.uint("unquantized_layers").unwrap_or(0),
        unquantized_mixer_layers: r.uints("unquantized_mixer_layers"),
        quant_group: r.uint("quant_group").unwrap_or(0),
        weight_block: r.uints("weight_block"),
        mtp_layers: r.uint("mtp_layers").unwrap_or(0),
        mrope: r.boolean("mrope").unwrap_or(false),
        layer_intermediate: r.uints("layer_intermediate"),
    }
}

/// An SLO's bounds, one per `metric[.percentile] = <op> value` field.
fn slo(f: &BTreeMap<String, FieldValue>) -> Slo {
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
    Slo { bounds }
}
