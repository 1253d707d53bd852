//! Consistency rules inside one model definition (heads, MoE, MLA fields), and its
//! layer pattern expanded to one kind per layer.

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    /// Consistency rules inside one model definition.
    pub(super) fn model_rules(
        &mut self,
        file: FileId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
        m: &Model,
    ) -> bool {
        let mut ok = true;
        let at = |name: &str| {
            f.get(name)
                .map(|v| v.at)
                .unwrap_or(FileSpan::new(file, raw.name.span))
        };
        let mut fail = |this: &mut Self, at: FileSpan, msg: String, label: &str, help: String| {
            this.push(
                Diagnostic::new(Code::OutOfRange, msg)
                    .primary(at.file, at.span, label)
                    .help(help),
            );
            ok = false;
        };
        if m.kv_heads > m.heads {
            fail(
                self,
                at("kv_heads"),
                format!("`kv_heads` ({}) exceeds `heads` ({})", m.kv_heads, m.heads),
                "too many KV heads",
                "GQA shares each KV head among several query heads: kv_heads ≤ heads".into(),
            );
        } else if !m.heads.is_multiple_of(m.kv_heads.max(1)) {
            fail(
                self,
                at("kv_heads"),
                format!(
                    "`heads` ({}) is not a multiple of `kv_heads` ({})",
                    m.heads, m.kv_heads
                ),
                "does not divide heads",
                "check the model's config.json".into(),
            );
        }
        let per_layer = m.detail.layer_intermediate.len() as u64;
        if per_layer > 0 && per_layer != m.layers {
            fail(
                self,
                at("layer_intermediate"),
                format!(
                    "`layer_intermediate` lists {per_layer} sizes, the model has {} layers",
                    m.layers
                ),
                "one size per layer",
                "list each layer's MLP intermediate size in order (0 for a layer without one)"
                    .into(),
            );
        }
        let block = &m.detail.weight_block;
        if !block.is_empty() && block.len() != 2 {
            fail(
                self,
                at("weight_block"),
                format!(
                    "`weight_block` lists {} sizes; a block is `[block_n, block_k]`",
                    block.len()
                ),
                "two sizes",
                "copy `weight_block_size` from the checkpoint's `quantization_config`, e.g. `[128, 128]`".into(),
            );
        }
        if m.experts > 0 && (m.experts_per_token == 0 || m.experts_per_token > m.experts) {
            fail(
                self,
                at("experts_per_token"),
                format!(
                    "a MoE model needs 1 ≤ `experts_per_token` ≤ `experts` ({})",
                    m.experts
                ),
                "top-k missing or too large",
                "set `experts_per_token` (num_experts_per_tok in config.json)".into(),
            );
        }
        if m.experts > 0 && m.moe_intermediate == 0 {
            fail(
                self,
                at("experts"),
                "a MoE model needs `moe_intermediate`".into(),
                "expert size missing",
                "set `moe_intermediate` (moe_intermediate_size in config.json)".into(),
            );
        }
        if m.attention == Attention::Mla && (m.kv_lora_rank == 0 || m.qk_rope_head_dim == 0) {
            fail(
                self,
                at("attention"),
                "MLA attention needs `kv_lora_rank` and `qk_rope_head_dim`".into(),
                "latent ranks missing",
                "copy them from config.json".into(),
            );
        }
        if m.dense_layers > m.layers {
            fail(
                self,
                at("dense_layers"),
                format!(
                    "`dense_layers` ({}) exceeds `layers` ({})",
                    m.dense_layers, m.layers
                ),
                "more than all layers",
                "dense_layers counts leading dense layers".into(),
            );
        }
        if m.sliding_layers > m.layers {
            fail(
                self,
                at("sliding_layers"),
                format!(
                    "`sliding_layers` ({}) exceeds `layers` ({})",
                    m.sliding_layers, m.layers
                ),
                "more than all layers",
                "count only the windowed layers".into(),
            );
        }
        ok
    }
}

impl<'s, 'w> Checker<'s, 'w> {
    /// Expands `layer_pattern` into `m.detail.layer_kinds` (one per layer, FFNs resolved)
    /// and checks it against the model: its length, and that every kind it uses has the
    /// dimensions it needs.
    pub(super) fn layer_pattern(
        &mut self,
        file: FileId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
        m: &mut Model,
    ) -> bool {
        let Some(field) = f.get("layer_pattern") else {
            return true;
        };
        let Value::Str(text) = &field.value else {
            return true;
        };
        let at = field.at;
        let fail = |this: &mut Self, msg: String, label: &str, help: &str| {
            this.push(
                Diagnostic::new(Code::InvalidLayerPattern, msg)
                    .primary(at.file, at.span, label)
                    .help(help.to_string()),
            );
            false
        };
        let written = match crate::layers::parse(text) {
            Ok(w) => w,
            Err(e) => {
                return fail(
                    self,
                    format!("layer pattern: {} (at character {})", e.message, e.offset + 1),
                    "cannot read this pattern",
                    "e.g. \"(3 linear, full) × 16\"; kinds: full, sliding, linear, mamba, none, compressedN, optionally +dense/+moe/+none",
                )
            }
        };
        if written.len() as u64 != m.layers {
            return fail(
                self,
                format!(
                    "the layer pattern lists {} layers, the model has {} (`layers`)",
                    written.len(),
                    m.layers
                ),
                "wrong number of layers",
                "a count after `×` repeats the parenthesised group before it: `(3 linear, full) × 16` is 64 layers",
            );
        }
        if written.iter().all(|w| w.mixer == Mixer::None) {
            return fail(
                self,
                "the layer pattern has no layer that mixes tokens (every one is `none`)".into(),
                "no attention, linear attention or Mamba layer",
                "a language model needs at least one: e.g. `(mamba+none, moe) × 8, full`",
            );
        }
        let uses = |k: Mixer| written.iter().any(|w| w.mixer == k);
        let _ = (file, raw);
        let mut missing: Vec<&str> = Vec::new();
        if uses(Mixer::Sliding) && m.sliding_window.is_none() {
            missing.push("`sliding_window` (sliding layers)");
        }
        if uses(Mixer::Linear)
            && m.detail
                .linear
                .is_none_or(|la| la.key_dim == 0 || la.value_dim == 0)
        {
            missing.push(
                "`linear_value_heads`, `linear_key_dim` and `linear_value_dim` (linear layers)",
            );
        }
        if uses(Mixer::Mamba)
            && m.detail
                .mamba
                .is_none_or(|mb| mb.head_dim == 0 || mb.state == 0)
        {
            missing.push("`mamba_heads`, `mamba_head_dim` and `mamba_state` (mamba layers)");
        }
        if written.iter().any(|w| w.ffn == Some(Ffn::Moe)) && m.experts == 0 {
            missing.push("`experts` (moe layers)");
        }
        if !missing.is_empty() {
            return fail(
                self,
                format!("the layer pattern needs {}", missing.join(", ")),
                "kinds without their dimensions",
                "copy them from config.json",
            );
        }
        let sliding = written.iter().filter(|w| w.mixer == Mixer::Sliding).count() as u64;
        if f.contains_key("sliding_layers") && m.sliding_layers != sliding {
            return fail(
                self,
                format!(
                    "`sliding_layers` = {} but the layer pattern has {sliding} sliding layers",
                    m.sliding_layers
                ),
                "disagrees with sliding_layers",
                "drop `sliding_layers`: the pattern says which layers are windowed",
            );
        }
        m.sliding_layers = sliding;
        m.set_layers(&written);
        true
    }
}
